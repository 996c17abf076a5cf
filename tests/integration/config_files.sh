#!/usr/bin/env bash
# --config FILE.toml on a subcommand: its keys are that subcommand's long flag names (lists as
# TOML arrays, flags as true/false), a flag on the command line wins over the file, and a key
# that names no flag, a file that does not exist, or a syntax error (named by its line) is
# refused in one line naming it. Checked on
# predict, on a nested subcommand (bench predict) and on train.
source "$(dirname "$0")/lib.sh"
profile="$SRC/tests/fixtures/predictor/regression/profile.json"
[ -f "$profile" ] || fail "no fixture profile at $profile"
cat >"$WORK/predict.toml" <<TOML
# every value here differs from the default
profile = "$profile"
workers = [1, 3]
policy = ["p3"]
mode = "async"
steps = 40
seeds = 1
json = "$WORK/from-file.json"
TOML
timeout 120 "$PSBED" predict --config "$WORK/predict.toml" >"$WORK/predict.out" 2>&1 ||
  { cat "$WORK/predict.out"; fail "predict --config failed"; }
json "$WORK/from-file.json" \
  'sys.exit(0 if [(r["workers"], r["policy"], r["mode"]) for r in s] == [(1, "p3", "async"), (3, "p3", "async")] else 1)' ||
  { cat "$WORK/from-file.json"; fail "predict did not take workers, policy and mode from the file"; }
# The command line wins over the file.
timeout 120 "$PSBED" predict --config "$WORK/predict.toml" --workers 2 --json "$WORK/flag.json" >"$WORK/flag.out" 2>&1 ||
  { cat "$WORK/flag.out"; fail "predict --config with --workers failed"; }
json "$WORK/flag.json" 'sys.exit(0 if [(r["workers"], r["policy"]) for r in s] == [(2, "p3")] else 1)' ||
  { cat "$WORK/flag.json"; fail "--workers on the command line did not win over the file"; }
# A key that is no flag of the subcommand: refused, naming it.
printf 'profile = "%s"\nwrokers = 3\n' "$profile" >"$WORK/typo.toml"
if timeout 60 "$PSBED" predict --config "$WORK/typo.toml" >"$WORK/typo.out" 2>&1; then fail "a misspelt key was accepted"; fi
grep -qF "line 2: unknown key 'wrokers': \`psbed predict\` has no --wrokers" "$WORK/typo.out" ||
  { cat "$WORK/typo.out"; fail "the misspelt key is not named with its line and command"; }
[ "$(wc -l <"$WORK/typo.out")" -le 2 ] || { cat "$WORK/typo.out"; fail "more than a short error for a misspelt key"; }
# A section that is no sub-subcommand, and a key that is no flag of the section's: refused,
# naming them, before anything is contacted.
printf 'run = "%s"\n[bogus]\nx = 3\n' "$WORK/none" >"$WORK/section.toml"
if timeout 30 "$PSBED" ctl --config "$WORK/section.toml" status >"$WORK/section.out" 2>&1; then fail "an unknown section was accepted"; fi
grep -qF "line 2: the section [bogus] is no subcommand of \`psbed ctl\`, expected [policy], [comm], [status]" "$WORK/section.out" ||
  { cat "$WORK/section.out"; fail "the unknown section is not named"; }
printf 'run = "%s"\n[policy]\ncredit = "1MiB"\nslices = 3\n' "$WORK/none" >"$WORK/section.toml"
if timeout 30 "$PSBED" ctl --config "$WORK/section.toml" policy p3 >"$WORK/section.out" 2>&1; then fail "an unknown key in a section was accepted"; fi
grep -qF "line 4: unknown key 'slices': \`psbed ctl policy\` has no --slices" "$WORK/section.out" ||
  { cat "$WORK/section.out"; fail "the unknown key of a section is not named"; }
# A key of the same name in another section: the line named is the section's.
printf 'run = "%s"\ntimeout = 5\n[policy]\ntimeout = 5\n' "$WORK/none" >"$WORK/section.toml"
if timeout 30 "$PSBED" ctl --config "$WORK/section.toml" policy p3 >"$WORK/section.out" 2>&1; then fail "ctl policy took --timeout"; fi
grep -qF "line 4: unknown key 'timeout': \`psbed ctl policy\` has no --timeout" "$WORK/section.out" ||
  { cat "$WORK/section.out"; fail "the key in the section is not named by its own line"; }
# A quoted key is the same key: given twice, refused.
syntax_dup() { printf '%b' "$1" >"$WORK/dup.toml"
  if timeout 30 "$PSBED" predict --config "$WORK/dup.toml" >"$WORK/dup.out" 2>&1; then fail "a key given twice was accepted: $1"; fi
  grep -qF "$2" "$WORK/dup.out" || { cat "$WORK/dup.out"; fail "no '$2' for $1"; }; }
syntax_dup 'workers = [1]\n"workers" = [4]\n' "line 2: '\"workers\"' is given twice (first on line 1)"
# A file from a pipe (process substitution) is read as before; a one-letter key is the short flag.
timeout 60 "$PSBED" predict --config <(printf 'profile = "%s"\nworkers = [1]\npolicy = ["wfbp"]\nsteps = 20\nseeds = 1\n' "$profile") \
  --json "$WORK/pipe.json" >"$WORK/pipe.out" 2>&1 || { cat "$WORK/pipe.out"; fail "a config file from a pipe"; }
printf 'o = "%s"\n' "$WORK/short-profile.json" >"$WORK/short.toml"
timeout 60 "$PSBED" profile --config "$WORK/short.toml" "$SRC/tests/fixtures/predictor/run-1w" >"$WORK/short.out" 2>&1 ||
  { cat "$WORK/short.out"; fail "profile with its -o in a file"; }
[ -s "$WORK/short-profile.json" ] || fail "profile's -o from a file was not used"
# A file that does not exist: refused, naming it.
if timeout 60 "$PSBED" predict --config "$WORK/nowhere.toml" >"$WORK/none.out" 2>&1; then fail "a missing config file was accepted"; fi
grep -qF -- "--config: cannot read '$WORK/nowhere.toml': No such file or directory" "$WORK/none.out" ||
  { cat "$WORK/none.out"; fail "the missing file is not named"; }
# Two files: refused, not one of them quietly ignored.
if timeout 60 "$PSBED" predict --config "$WORK/predict.toml" --config "$WORK/typo.toml" >"$WORK/two.out" 2>&1; then fail "two config files were accepted"; fi
grep -q "one file at a time" "$WORK/two.out" || { cat "$WORK/two.out"; fail "no reason for refusing two files"; }
# Syntax errors name the file and the line (CLI11's reader would run an open array on into the
# next line: `workers = [1, 2` then `steps = 4` read as the value "2steps = 4").
syntax_error() {  # syntax_error EXPECTED-TEXT FILE-TEXT
  printf '%b' "$2" >"$WORK/syntax.toml"
  if timeout 60 "$PSBED" predict --config "$WORK/syntax.toml" >"$WORK/syntax.out" 2>&1; then fail "a config file with a syntax error was accepted: $2"; fi
  grep -qF -- "'$WORK/syntax.toml' $1" "$WORK/syntax.out" || { cat "$WORK/syntax.out"; fail "no \"$1\" in the error for: $2"; }
  [ "$(wc -l <"$WORK/syntax.out")" -le 1 ] || { cat "$WORK/syntax.out"; fail "more than one line for a syntax error"; }
}
syntax_error "line 2: the array opened here is not closed before line 3" 'seeds = 1\nworkers = [1, 2\nsteps = 4\n'
syntax_error "line 1: a string is not closed" 'json = "x.json\n'
syntax_error "line 2: expected key = value, got 'steps 4'" '# c\nsteps 4\n'
syntax_error "line 1: unexpected text after the array: ']'" 'workers = [1, 2]]\n'
syntax_error "line 1: unexpected text after the array: 'steps = 4'" 'workers = [1, 2] steps = 4\n'
syntax_error "line 2: 'steps' has no value" 'seeds = 1\nsteps =\n'
syntax_error "line 1: a value with no key" '= 5\n'
syntax_error "line 3: 'steps' is given twice (first on line 1)" 'steps = 4\nseeds = 1\nsteps = 5\n'
syntax_error "line 1: an array inside an array" 'workers = [[1], 2]\n'
syntax_error "line 3: the array opened here is not closed by the end of the file" '\n\nworkers = [1,\n 2\n'
# Arrays may span lines, comments go anywhere, and a '#' inside quotes is part of the value.
cat >"$WORK/multi.toml" <<TOML
profile = "$profile"  # the fixture
workers = [1,  # one worker
           2]  # and two
policy = [
  'p3',
]
mode = "async"
steps = 30
seeds = 1
json = "$WORK/run#1.json"
TOML
timeout 120 "$PSBED" predict --config "$WORK/multi.toml" >"$WORK/multi.out" 2>&1 ||
  { cat "$WORK/multi.out"; fail "predict --config with a multi-line array failed"; }
json "$WORK/run#1.json" 'sys.exit(0 if [(r["workers"], r["policy"]) for r in s] == [(1, "p3"), (2, "p3")] else 1)' ||
  { ls "$WORK"; fail "the multi-line array, the comments or the quoted '#' were misread"; }
# A nested subcommand.
printf 'workers = [2]\nsteps = 7\nfidelity = "exact"\njson = "%s"\n' "$WORK/bench.json" >"$WORK/bench.toml"
timeout 120 "$PSBED" bench predict --config "$WORK/bench.toml" >"$WORK/bench.out" 2>&1 ||
  { cat "$WORK/bench.out"; fail "bench predict --config failed"; }
json "$WORK/bench.json" 'sys.exit(0 if [(r["workers"], r["steps"], r["fidelity"]) for r in s] == [(2, 7, "exact")] else 1)' ||
  { cat "$WORK/bench.json"; fail "bench predict did not take workers and steps from the file"; }
# train: a flag (no-eval) and numbers, in a file that opens with a byte-order mark (as editors on
# Windows write it): no part of the first key.
printf '\xef\xbb\xbfdata = "synthetic"\nsteps = 6\nbatch = 8\nthreads = 1\nno-eval = true\njson = "%s"\n' "$WORK/train.json" >"$WORK/train.toml"
timeout 120 "$PSBED" train --config "$WORK/train.toml" >"$WORK/train.out" 2>&1 ||
  { cat "$WORK/train.out"; fail "train --config failed"; }
json "$WORK/train.json" 'sys.exit(0 if s["steps"] == 6 and s["batch"] == 8 and s["test_accuracy"] is None else 1)' ||
  { cat "$WORK/train.json"; fail "train did not take steps, batch and no-eval from the file"; }
echo "PASS"
