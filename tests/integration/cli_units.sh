#!/usr/bin/env bash
# One convention on every command line: each duration flag takes units (30s, 500ms, 2min, 1h; a
# bare number keeps the unit the flag always had), each size flag takes units (256MiB), gbps is
# refused with a hint, a file is --json FILE and a folder --out DIR, and psbed --version answers.
# The walk goes through --help of every subcommand, so a flag added later is held to it too.
source "$(dirname "$0")/lib.sh"
"$PSBED" --version | grep -qE "^psbed [0-9]+\.[0-9]+\.[0-9]+$" || fail "psbed --version"

subs=$("$PSBED" --help | awk '/^Subcommands:/{on=1; next} on && !NF {on=0} on && /^  [a-z]/ {print $1}')
paths=()
for s in $subs; do
  nested=$("$PSBED" $s --help | awk '/^Subcommands:/{on=1; next} on && !NF {on=0} on && /^  [a-z]/ {print $1}')
  if [ -n "$nested" ]; then for n in $nested; do paths+=("$s $n"); done; fi
  paths+=("$s")
done
[ "${#paths[@]}" -ge 18 ] || fail "only ${#paths[@]} subcommands found in --help"

# Options whose name or help says time or bytes must be typed DURATION, SIZE or RATE.
for p in "${paths[@]}"; do
  "$PSBED" $p --help >"$WORK/help.txt"
  python3 - "$p" "$WORK/help.txt" >>"$WORK/flags.txt" <<'PY' || fail "psbed ${p}: a flag of time or bytes takes no units"
import re, sys
path, text = sys.argv[1], open(sys.argv[2]).read()
bad = []
for m in re.finditer(r"^  (?:-\w,)?(--[\w-]+(?:,--[\w-]+)*)(?: ([A-Z][A-Z_:|]*[^ \n]*))?\s*(.*)$", text, re.M):
    names, typ, helptext = m.group(1), m.group(2) or "", m.group(3)
    name = names.split(",")[0]
    timeish = re.search(r"(timeout|heartbeat|-every|seconds|-ms\b|-us\b|delay|interval|jitter|spread|stagger)", name)
    sizeish = re.search(r"(bytes|credit)", name)
    if not (timeish or sizeish) or typ == "" or name in ("--min-seconds-raw",):
        continue
    kind = next((k for k in ("DURATION", "SIZE", "RATE") if k in typ), typ.split(":")[0])
    if kind not in ("DURATION", "SIZE", "RATE"):
        bad.append(f"{name} is {typ}")
    print(f"{path}\t{name}\t{kind}")
if bad:
    print(f"psbed {path}: " + "; ".join(bad), file=sys.stderr)
    sys.exit(1)
PY
done
durations=$(awk -F'\t' '$3 == "DURATION"' "$WORK/flags.txt" | wc -l)
sizes=$(awk -F'\t' '$3 == "SIZE"' "$WORK/flags.txt" | wc -l)
[ "$durations" -ge 25 ] && [ "$sizes" -ge 5 ] || { cat "$WORK/flags.txt"; fail "too few unit flags found ($durations durations, $sizes sizes)"; }

# Every DURATION and SIZE flag reads its unit: a wrong one is refused naming the flag and the
# units, so the transform is there (a usage error, before any work).
while IFS=$'\t' read -r p name kind; do
  case "$kind" in DURATION) bad=3parsecs; want="bad duration '3parsecs'" ;; SIZE) bad=3MiBs; want="bad size '3MiBs'" ;; *) continue ;; esac
  rc=0; "$PSBED" $p "$name" "$bad" >"$WORK/out.txt" 2>&1 || rc=$?
  [ "$rc" = 2 ] && grep -qF -- "$name: $want" "$WORK/out.txt" ||
    { cat "$WORK/out.txt"; fail "psbed $p $name $bad: not refused as a usage error naming the unit (rc $rc)"; }
done <"$WORK/flags.txt"

# A bandwidth in gbps is refused with the hint.
rc=0; "$PSBED" launch --bandwidth 10gbps >"$WORK/out.txt" 2>&1 || rc=$?
[ "$rc" = 2 ] && grep -qF "'gbps' is ambiguous (tc reads it as bytes per second); write gbit" "$WORK/out.txt" ||
  { cat "$WORK/out.txt"; fail "10gbps was not refused with its hint"; }
"$PSBED" profile "$SRC/tests/fixtures/predictor/run-1w" --json "$WORK/profile.json" >"$WORK/out.txt" 2>&1 ||
  { cat "$WORK/out.txt"; fail "profile --json"; }
"$PSBED" predict --profile "$WORK/profile.json" --workers 2 --bandwidth "1Gbit/s" --seeds 1 \
  --steps 10 >"$WORK/out.txt" 2>&1 || { cat "$WORK/out.txt"; fail "a rate as psbed prints it (1Gbit/s) was refused"; }

# Units at work: a short run with every timing flag in units, from the command line and a file.
printf 'heartbeat = "250ms"\nstall-timeout = "1min"\n' >"$WORK/units.toml"
timeout 120 "$PSBED" launch --config "$WORK/units.toml" --servers 1 --workers 2 --model lenet5 --data synthetic \
  --steps 10 --batch 16 --threads 1 --timeout 2min --heartbeat-timeout 3s --start-stagger-ms 0.1s \
  --out "$WORK/run" >"$WORK/run.out" 2>&1 || { tail -20 "$WORK/run.out"; fail "the run with units failed"; }
python3 - "$WORK/run/traces/worker-1.trace.json" <<'PY' || fail "--start-stagger-ms 0.1s was not read as 100 ms"
import json, sys
t = json.load(open(sys.argv[1]))["metadata"]
assert t["start_stagger_ms"] == 100, t["start_stagger_ms"]
PY

# Files are --json FILE: profile's old --out still works, out of --help.
"$PSBED" profile --help | grep -q -- "-o,--json" || fail "profile's file is not --json"
"$PSBED" profile --help | grep -qE -- "^ +(-o,)?--out" && fail "profile --help still shows --out for a file"
echo "PASS: $durations duration and $sizes size flags over ${#paths[@]} subcommands"
