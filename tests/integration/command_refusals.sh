#!/usr/bin/env bash
# The commands besides launch refuse values they cannot work with at once, in a line naming the
# flag and what was expected, before any work: train, the benchmarks, the coordinator. Where
# they write a file, a path they cannot write is refused before the work, not after it. A model
# whose classes the data's labels exceed is refused naming the labels file, and the default
# data folder is found from any working folder.
source "$(dirname "$0")/lib.sh"
refused() {  # refused EXPECTED-TEXT ARGS...: psbed ARGS fails within 30 s, saying EXPECTED-TEXT
  local want=$1; shift
  if timeout 30 "$PSBED" "$@" >"$WORK/refused.out" 2>&1; then fail "psbed $* was accepted"; fi
  grep -qF -- "$want" "$WORK/refused.out" || { cat "$WORK/refused.out"; fail "psbed $*: no '$want' in the error"; }
  [ "$(grep -c . "$WORK/refused.out")" -le 2 ] || { cat "$WORK/refused.out"; fail "psbed $*: more than a short error"; }
}
# Usage errors: one line naming the subcommand, exit status 2; a failure of the work itself exits 1,
# and --help 0.
refused "psbed: unknown subcommand 'lanch', expected one of: train, bench," lanch --workers 2
refused "psbed bench: unknown subcommand 'nosuch', expected one of: compute, ps, coordinator, predict" bench nosuch
refused "psbed ctl: unknown subcommand 'polcy', expected one of: policy, comm, status" ctl --run "$WORK/none" polcy
# A coordinator address nothing listens on, or whose host does not resolve: said within 3 s, not
# after ctl's 45 s wait for an answer.
start=$SECONDS
refused "no coordinator at tcp://127.0.0.1:1: nothing accepted a connection within 3 s" ctl --coordinator tcp://127.0.0.1:1 status
refused "no coordinator at tcp://nosuchhost.invalid:7000: its host 'nosuchhost.invalid' does not resolve" \
  ctl --coordinator tcp://nosuchhost.invalid:7000 status
[ $((SECONDS - start)) -le 15 ] || fail "ctl took $((SECONDS - start)) s to find no coordinator"
refused "psbed launch: The following argument was not expected: --bogus (see \`psbed launch --help\`)" launch --bogus
refused "psbed bench predict: --workers: Value 0 not in range" bench predict --workers 0
# bench predict checks its settings before it prints its table's head.
refused "unknown policy 'foo'" bench predict --workers 2 --steps 20 --policy foo
refused "--link-model: expected bucket or fair, got 'foo'" bench predict --workers 2 --steps 20 --link-model foo
if "$PSBED" bench predict --workers 2 --steps 20 --policy foo 2>/dev/null | grep -q .; then fail "bench predict printed a table for an unknown policy"; fi
# A subcommand's options given before it: said to go after it, their values not taken for it.
refused "psbed: --log-level debug: a subcommand's options go after it (\`psbed launch --log-level debug ...\`)" \
  --log-level debug launch --workers 2
refused "psbed: unknown subcommand 'lanch', expected one of: train," --log-level debug lanch
refused "psbed: no subcommand given (--log-level debug); expected one of: train," --log-level debug
refused "psbed: unknown option '--log-levl' (a subcommand's options go after it;" --log-levl debug launch
refused "psbed: --min-seconds 3: a subcommand's options go after it (\`psbed bench compute --min-seconds 3 ...\`)" \
  --min-seconds 3 bench compute
exit_status() { local rc=0; timeout 30 "$PSBED" "$@" >/dev/null 2>&1 || rc=$?; echo "$rc"; }
for args in "lanch" "bench nosuch" "bench predict --workers 2,,4" "launch --bogus" "launch --workers x" "predict" "train --steps 0" \
  "--log-level debug launch"; do
  # shellcheck disable=SC2086
  [ "$(exit_status $args)" = 2 ] || fail "psbed $args: a usage error, exit status $(exit_status $args), expected 2"
done
[ "$(exit_status predict --profile "$WORK/none.json")" = 1 ] || fail "a missing profile did not exit 1"
[ "$(exit_status launch --help)" = 0 ] || fail "launch --help did not exit 0"
need_data
refused "--momentum: expected a momentum, 0 or more and below 1, got '1.5'" train --momentum 1.5
refused "--steps: Value 0 not in range" train --steps 0
# A value that is not a number, and a one-value flag given twice, in plain words.
refused "psbed train: --batch: expected a whole number from 1 to 1048576, got 'abc'" train --batch abc
refused "--batch: expected a whole number from 1 to 1048576, got '1.5'" train --batch 1.5
refused "psbed predict: --workers: expected a whole number from 1 to 100000, got 'two'" predict --workers two
refused "psbed launch: --servers: takes one value, got 2 (given twice" launch --servers 1 --servers 2
# An empty item of a list (CLI11 drops it, and reads an empty number list as 0).
refused "psbed predict: --workers: an empty item in '1,,2' (expected values comma-separated, none empty)" \
  predict --profile "$WORK/none.json" --workers 1,,2 --analytic
refused "psbed predict: --workers: an empty item in '2,,4'" predict --profile "$WORK/none.json" --workers 1 2,,4
refused "psbed sweep: --lr: expected a learning rate, 0 or more, got '0x10'" sweep --lr 0x10 --out "$WORK/sw"
refused "psbed sweep: --policy: an empty item in 'wfbp,' (expected values comma-separated" sweep --policy=wfbp, --out "$WORK/sw"
refused "psbed sweep: --workers: an empty value (expected one or more numbers, comma-separated)" sweep --workers "" --out "$WORK/sw"
[ ! -e "$WORK/sw" ] || fail "a refused sweep made its folder"
refused "--seed: expected a seed, a whole number from 0 to 18446744073709551615, got '-1'" train --seed -1
refused "got '99999999999999999999'" train --seed 99999999999999999999
refused "--progress-every: expected a number of seconds, above 0 and below 10^9, got '0'" train --progress-every 0
refused "--lr: expected a learning rate, 0 or more, got '1x'" train --lr 1x
# Hand-started roles check what launch checks, before they wait for anyone.
refused "--partition-bytes must be at least 4 bytes (one float), got '2'" coordinator --partition-bytes 2
refused "--partition-bytes: bad size 'junk'" coordinator --partition-bytes junk
refused "--heartbeat-timeout must be at least twice --heartbeat (1 s), got 1" coordinator --heartbeat 1 --heartbeat-timeout 1
# Push-pull is async only, and not with a backup's copy, in every command that takes it.
refused "--push-pull with --replicas 2" launch --servers 2 --replicas 2 --push-pull --out "$WORK/pp"
refused "--connections above 1 with --replicas 2" launch --servers 2 --replicas 2 --connections 2 --out "$WORK/c2"
refused "--connections above 1 with --replicas 2" coordinator --servers 2 --replicas 2 --connections 2
refused "--push-pull with --replicas 2" \
  predict --profile "$SRC/docs/grid/lenet5/profile-host-lenet5.json" --servers 2 --replicas 2 --push-pull
[ ! -e "$WORK/pp" ] || fail "a refused launch made its folder"
refused "psbed worker: --connect-timeout: expected a number of seconds, above 0" worker --connect-timeout -1
refused "psbed server: --heartbeat: expected a number of seconds, above 0" server --heartbeat 0
refused "--partition-bytes 4 cuts the 4 MiB model into about 1048576 parts, expected at most 100000" \
  bench ps --partition-bytes 4 --models 4 --aggregate-model 4
refused "--partition-bytes: bad size 'junk'" bench ps --partition-bytes junk
refused "--epochs: expected a whole number from 1 to 1000000, got '1.5'" train --epochs 1.5
refused "--json and --save-params name the same file" train --steps 1 --json "$WORK/same" --save-params "$WORK/same"
refused "model spec '$WORK/none.toml' cannot be read (no such file)" train --model "$WORK/none.toml"
# Checked as the float the value becomes (1e39 is infinite, 0.99999999999 is 1), and no hex.
refused "--lr: expected a learning rate, 0 or more, got '1e39'" train --lr 1e39
refused "--lr: expected a learning rate, 0 or more, got '0x10'" train --lr 0x10
refused "--momentum: expected a momentum, 0 or more and below 1, got '0.99999999999'" train --momentum 0.99999999999
refused "--min-steps: Value 0 not in range" bench compute --min-steps 0 --min-seconds 0
refused "--warmup: Value -3 not in range" bench compute --warmup -3
refused "--batch: Value -5 not in range" bench compute --batch -5
refused "--repeat: Value 0 not in range" bench ps --repeat 0
refused "--workers: Value 0 not in range" bench ps --workers 0
refused "--models: Value -4 not in range" bench ps --models -4
refused "--push-pull times the main tables" bench ps --push-pull --secure
refused "--connections, --secure and --replicas 2 each time their own table" bench ps --connections 2 --secure
refused "--connections: Value 9 not in range 1 to 8" launch --connections 9 --out "$WORK/c9"
refused "--aggregate-model: Value 0 not in range" bench ps --aggregate-model 0
refused "--min-seconds: expected a number of seconds, above 0 and below 10^9, got '0'" bench ps --min-seconds 0
# A value given twice: refused (it ran its points twice into one folder, the second run taking
# the first, finished one, for a failed run); a run folder given twice to validate likewise.
refused "--policy gives wfbp twice (to run a point again, use --repeat)" sweep --workers 1 --policy wfbp,wfbp \
  --steps 5 --out "$WORK/dup-sweep"
[ ! -e "$WORK/dup-sweep" ] || fail "sweep created its folder before refusing a value given twice"
fixture="$SRC/tests/fixtures/predictor/regression"
run="$fixture/runs/$(ls "$fixture/runs" | head -1)"
refused "is given twice" validate --profile "$fixture/profile.json" "$run" "$run/" --out "$WORK/dup-report"
refused "bad duration '200': give its unit" predict --profile "$fixture/profile.json" --latency 200
refused "--start-stagger-ms: expected milliseconds, 0 or more and below 10^7, got '-1000'" predict --profile "$fixture/profile.json" \
  --start-stagger-ms -1000
refused "--partition-bytes 0: expected 4 bytes (one float) or more" predict --profile "$fixture/profile.json" \
  --partition-bytes 0
# The predictor's commands: a value that does not parse (a size, a bandwidth, a duration, a word
# outside a flag's fixed set, 1.5 for a whole number) is a usage error like `--workers abc`, exit
# status 2 and one line naming the flag; a policy or mode that names nothing known is found when
# the work is set up, as launch finds it: status 1, the flag named.
pf="$fixture/profile.json"
usage() {  # usage EXPECTED-TEXT ARGS...: a usage error, exit status 2, saying EXPECTED-TEXT
  refused "$@"
  shift
  [ "$(exit_status "$@")" = 2 ] || fail "psbed $*: exit status $(exit_status "$@"), expected 2 (a usage error)"
}
work_error() {  # work_error EXPECTED-TEXT ARGS...: refused when the work is set up, exit status 1
  refused "$@"
  shift
  [ "$(exit_status "$@")" = 1 ] || fail "psbed $*: exit status $(exit_status "$@"), expected 1"
}
usage "psbed predict: --link-model: expected bucket or fair, got 'bogus'" predict --profile "$pf" --link-model bogus
usage "say which cluster: --coordinator ENDPOINT or --run RUN_FOLDER" ctl status
usage "psbed predict: --compute: expected auto, real or replay, got 'bogus'" predict --profile "$pf" --compute bogus
usage "psbed predict: --bandwidth: bad bandwidth '1xb': unknown unit 'xb'" predict --profile "$pf" --bandwidth 1xb
usage "psbed predict: --latency: bad duration '1xb': unknown unit 'xb'" predict --profile "$pf" --latency 1xb
usage "psbed predict: --credit: bad size 'abc'" predict --profile "$pf" --credit abc
usage "psbed predict: --partition-bytes: bad size '1xb'" predict --profile "$pf" --partition-bytes 1xb
usage "psbed predict: --host-cpus: expected a whole number from 0 to 1024, got '1.5'" predict --profile "$pf" --host-cpus 1.5
usage "psbed optimize: --max-nodes: expected a whole number from 2 to 1024, got 'abc'" optimize --profile "$pf" --max-nodes abc
usage "psbed optimize: --max-nodes: Value 100000 not in range 2 to 1024" optimize --profile "$pf" --max-nodes 100000 --steps 1
usage "psbed optimize: --credit: bad size 'abc'" optimize --profile "$pf" --credit abc
usage "psbed optimize: --bandwidth: bad bandwidth '1xb'" optimize --profile "$pf" --bandwidth 1xb
usage "psbed validate: --latency: bad duration '1xb'" validate --profile "$pf" "$run" --latency 1xb --out "$WORK/v"
usage "psbed validate: --link-model: expected bucket or fair, got 'x'" validate --profile "$pf" "$run" --link-model x --out "$WORK/v"
usage "psbed bench predict: --bandwidth: bad bandwidth '1xb'" bench predict --bandwidth 1xb
usage "psbed bench predict: --link-model: expected bucket or fair, got 'bogus'" bench predict --link-model bogus
usage "psbed profile: --skip-steps: expected a whole number" profile "$run" --skip-steps abc -o "$WORK/p.json"
work_error "psbed: error: --policy: unknown policy 'bogus', expected one of: bulk," predict --profile "$pf" --policy bogus
work_error "psbed: error: --mode: unknown consistency mode 'bogus'" optimize --profile "$pf" --mode bogus
work_error "psbed: error: --policy: unknown policy 'bogus'" bench predict --policy bogus
[ ! -e "$WORK/v" ] || fail "validate made its --out folder for a usage error"
# Both --epochs and --steps: one would be dropped without a word.
usage "psbed train: --epochs excludes --steps" train --model lenet5 --epochs 2 --steps 5
# Work far past the memory there is: refused at once with the sizes, not killed halfway (the
# synthetic data is made whole in memory; bench ps holds the model and a gradient per worker).
printf 'name = "big"\ninput = [3, 2048, 2048]\nclasses = 10\n[[layer]]\ntype = "maxpool"\nkernel = 64\n[[layer]]\ntype = "fc"\nout = 10\n' >"$WORK/big.toml"
mem_kib=$(awk '/^MemAvailable/ {print $2}' /proc/meminfo)
if [ "${mem_kib:-0}" -lt $((400 * 1024 * 1024)) ]; then  # under 400 GiB: these do not fit
  work_error "synthetic data: 10000 samples of 3x2048x2048 take 468.8 GiB, more than the" \
    train --model "$WORK/big.toml" --data synthetic --steps 1
  work_error "bench ps: the largest run needs about 2056.0 GiB (4096 MiB models, up to 256 workers), more than the" \
    bench ps --models 1 --workers 256 --aggregate-model 4096
fi
# The same values in the commands that run a cluster: a usage error before anything starts.
usage "psbed launch: --credit: bad size 'abc'" launch --credit abc --out "$WORK/l"
usage "psbed launch: --bandwidth: bad bandwidth '1xb'" launch --bandwidth 1xb --out "$WORK/l"
usage "psbed launch: --latency: bad duration '200': give its unit" launch --latency 200 --out "$WORK/l"
usage "psbed launch: --partition-bytes: bad size '1xb'" launch --partition-bytes 1xb --out "$WORK/l"
usage "psbed sweep: --bandwidth: bad bandwidth '1xb'" sweep --bandwidth 100mbit,1xb --out "$WORK/l"
usage "psbed sweep: --credit: bad size 'abc'" sweep --credit abc --out "$WORK/l"
usage "psbed coordinator: --partition-bytes: bad size '3q'" coordinator --partition-bytes 3q
usage "psbed server: --latency: bad duration '200'" server --coordinator tcp://127.0.0.1:1 --latency 200
usage "psbed worker: --bandwidth: bad bandwidth '100': give its unit" worker --coordinator tcp://127.0.0.1:1 --bandwidth 100
usage "psbed bench ps: --partition-bytes: bad size 'zz'" bench ps --partition-bytes zz
[ ! -e "$WORK/l" ] || fail "a usage error left a run folder"
# A node's name names its trace file: no path in it.
usage "psbed worker: --name: expected letters, digits" worker --coordinator tcp://127.0.0.1:1 --name ../../evil
usage "psbed server: --name: expected letters, digits" server --coordinator tcp://127.0.0.1:1 --name "srv with space"
# A trace folder a node cannot write in is said before it joins, not after it trained.
touch "$WORK/afile"
work_error "--trace-dir: cannot create the folder '$WORK/afile/t'" worker --coordinator tcp://127.0.0.1:1 \
  --trace-dir "$WORK/afile/t" --connect-timeout 30
work_error "--trace-dir: cannot create the folder '$WORK/afile/t'" server --coordinator tcp://127.0.0.1:1 \
  --trace-dir "$WORK/afile/t" --connect-timeout 30
# validate's arguments: a file among the run folders (runs/* without the slash) is named a file,
# a folder that is not there "does not exist"; predict --analytic writes no traces, so
# --trace-out beside it is a usage error; a profile's negative figure is named when it is read,
# before anything is printed.
work_error "'$pf' is a file, not a run folder" validate --profile "$pf" "$run" "$pf" --out "$WORK/v"
work_error "run folder '$WORK/nosuch' does not exist" validate --profile "$pf" "$WORK/nosuch" --out "$WORK/v"
work_error "'$pf' is a file, not a run folder" profile "$pf" -o "$WORK/p.json"
usage "psbed predict: --analytic and --trace-out: the analytic bounds simulate nothing" \
  predict --profile "$pf" --analytic --trace-out "$WORK/traces"
[ ! -e "$WORK/traces" ] || fail "predict --analytic --trace-out made the folder"
python3 -c 'import json, sys; p = json.load(open(sys.argv[1])); p["link"]["bandwidth_bytes_per_sec"] = -1; json.dump(p, open(sys.argv[2], "w"))' \
  "$pf" "$WORK/negative.json"
work_error "profile '$WORK/negative.json': link: bandwidth_bytes_per_sec is -1.0, expected 0 or more" \
  predict --profile "$WORK/negative.json" --workers 2
timeout 60 "$PSBED" predict --profile "$pf" --workers 1 --policy wfbp --steps 10 --seeds 5 --seed 18446744073709551614 \
  >"$WORK/seed.out" 2>&1 || { cat "$WORK/seed.out"; fail "predict with a seed near 2^64"; }
grep -qF "the median of 5 draws (seeds 18446744073709551614 to 18446744073709551615, then 0 to 2)" "$WORK/seed.out" ||
  { cat "$WORK/seed.out"; fail "the seeds past 2^64 - 1 are not named as they run"; }
echo "sizes, bandwidths, durations: usage errors (exit 2) in every subcommand; unknown names 1, each in a line naming the flag"
echo "flags: one line each"

# Output paths: refused before the work (the file /proc/... cannot be created; root can write
# anywhere else).
refused "--json: cannot create the folder '/proc/psbed-nowhere'" bench compute --no-torch --models lenet5 \
  --json /proc/psbed-nowhere/c.json
refused "--json: cannot create the folder '/proc/psbed-nowhere'" bench ps --json /proc/psbed-nowhere/p.json
refused "--json: cannot write '/proc/psbed-x.json'" bench predict --workers 64 --steps 100000 --json /proc/psbed-x.json
refused "--json: '$WORK' is a folder, expected a file name" bench predict --workers 64 --steps 100000 --json "$WORK"
refused "--summary: cannot create the folder '/proc/psbed-nowhere'" coordinator --bind "tcp://127.0.0.1:*" \
  --summary /proc/psbed-nowhere/summary.json
refused "--json: cannot create the folder '/proc/psbed-nowhere'" train --data synthetic --steps 2 \
  --json /proc/psbed-nowhere/t.json
# A profile for the dashboard's prediction that cannot be read: refused before listening.
refused "cannot read profile '$WORK/none.json'" coordinator --bind "tcp://127.0.0.1:*" --profile "$WORK/none.json"
echo "output paths and the coordinator's profile: refused before the work"
# A file that exists where its folder is not writable for new files (a device here) is still taken.
timeout 60 "$PSBED" train --data synthetic --steps 2 --batch 8 --no-eval --json /dev/stdout >"$WORK/stdout.out" 2>/dev/null ||
  fail "train --json /dev/stdout"
grep -q '"images_per_sec"' "$WORK/stdout.out" || { cat "$WORK/stdout.out"; fail "no JSON on stdout"; }
# A seed is decimal whatever its leading zeros (CLI11 alone would read 010 as octal 8).
timeout 60 "$PSBED" predict --profile "$SRC/tests/fixtures/predictor/regression/profile.json" --workers 1 --policy wfbp \
  --steps 10 --seeds 1 --seed 010 --json "$WORK/seed.json" >/dev/null 2>&1 || fail "predict --seed 010"
json "$WORK/seed.json" 'sys.exit(0 if s[0]["seed"] == 10 else 1)' || { cat "$WORK/seed.json"; fail "--seed 010 is not 10"; }

# Programs psbed runs (validate's plot, bench compute's PyTorch reference) get their paths as
# arguments, never through a shell: quotes and ';' in a path run nothing (they ran `touch`).
printf '#!/bin/sh\nprintf "%%s\\n" "$@" >"$(dirname "$0")/args"\nexit 3\n' >"$WORK/fakepy"
chmod +x "$WORK/fakepy"
odd="$WORK/x';touch $WORK/INJECTED;'\$(touch $WORK/INJECTED)"
timeout 60 "$PSBED" validate --profile "$SRC/tests/fixtures/predictor/regression/profile.json" \
  "$SRC/tests/fixtures/predictor/regression/runs/lenet5-2w-bsp-bulk-100mbit" --steps 10 --seeds 1 \
  --python "$WORK/fakepy" --out "$odd" >"$WORK/odd.out" 2>&1 || { cat "$WORK/odd.out"; fail "validate into '$odd'"; }
[ ! -e "$WORK/INJECTED" ] || fail "validate --out '$odd' ran the command in its name"
[ -s "$odd/validation.json" ] || fail "validate wrote no validation.json in '$odd'"
[ "$(sed -n 2p "$WORK/args")" = "$odd/validation.json" ] || { cat "$WORK/args"; fail "the plot script did not get '$odd/validation.json'"; }
printf 'print(1)\n' >"$odd/bench.py"
PSBED_TORCH_BENCH="$odd/bench.py" timeout 60 "$PSBED" bench compute --models lenet5 --threads 1 --min-seconds 0 \
  --min-steps 1 --warmup 0 --python "$WORK/fakepy" >"$WORK/odd.out" 2>&1 || { cat "$WORK/odd.out"; fail "bench compute, script '$odd/bench.py'"; }
[ ! -e "$WORK/INJECTED" ] || fail "bench compute ran the command in its reference script's name"
[ "$(head -1 "$WORK/args")" = "$odd/bench.py" ] || { cat "$WORK/args"; fail "the reference did not get '$odd/bench.py'"; }
grep -q "cannot import torch" "$WORK/odd.out" || { cat "$WORK/odd.out"; fail "the reference's exit status 3 was not read"; }
echo "paths with quotes and ';' reach the programs psbed runs intact"

# The shortest compute benchmark: one timed step per row (no minimum time), never an empty row.
timeout 120 "$PSBED" bench compute --no-torch --models lenet5 --threads 1 --min-seconds 0 --min-steps 1 \
  --warmup 0 --json "$WORK/compute.json" >"$WORK/compute.out" 2>&1 || { cat "$WORK/compute.out"; fail "bench compute"; }
json "$WORK/compute.json" 'sys.exit(0 if s["rows"][0]["steps"] == 1 and s["rows"][0]["images_per_sec"] > 0 else 1)' ||
  { cat "$WORK/compute.json"; fail "bench compute with one timed step"; }
echo "bench compute: one timed step, one row"

# A model of 3 classes on the 10 digits: refused naming the labels file, by train and by launch
# (before anything starts); on synthetic data it trains, with 3 classes.
cat >"$WORK/three.toml" <<'EOF'
name = "three"
input = [1, 28, 28]
classes = 3
[[layer]]
type = "fc"
out = 3
EOF
labels="train-labels-idx1-ubyte: has labels up to 9 but the model has 3 classes"
refused "$labels" train --model "$WORK/three.toml" --data mnist --steps 2
refused "$labels" launch --model "$WORK/three.toml" --data mnist --steps 2 --workers 1 --out "$WORK/three-run"
[ ! -e "$WORK/three-run" ] || fail "launch created its run folder before refusing the data"
timeout 60 "$PSBED" train --model "$WORK/three.toml" --data synthetic --steps 5 --batch 16 --json "$WORK/three.json" \
  >"$WORK/three.out" 2>&1 || { cat "$WORK/three.out"; fail "a 3-class model on synthetic data"; }
echo "3 classes: refused on the digits, trained on synthetic data"

# The default data folder from another working folder: the checkout's data/mnist.
if [ "$(realpath "$PSBED_DATA_DIR")" = "$(realpath "$SRC/data/mnist")" ]; then
  (cd "$WORK" && unset PSBED_DATA_DIR && timeout 60 "$PSBED" train --model lenet5 --data mnist --steps 2 --batch 8 \
    --no-eval >"$WORK/elsewhere.out" 2>&1) || { cat "$WORK/elsewhere.out"; fail "train from another folder did not find the digits"; }
  echo "data: the checkout's digits found from $WORK"
else
  echo "data: PSBED_DATA_DIR is not the checkout's digits, so the default folder is not tried"
fi
# bench compute reads every spec before it times the first, and gives a spec of its own no PyTorch
# reference even under a shipped model's name (the reference builds the shipped model).
printf 'name = "lenet5"\ninput = [1, 28, 28]\n\n[[layer]]\ntype = "fc"\nout = 10\n' >"$WORK/mine.toml"
printf 'name = "zero"\ninput = [1, 28, 28]\n\n[[layer]]\ntype = "fc"\nout = 0\n' >"$WORK/zero.toml"
refused "zero.toml: layer #1" bench compute --models lenet5,"$WORK/zero.toml" --threads 1 --min-seconds 0.1 --no-torch
timeout 60 "$PSBED" bench compute --models "$WORK/mine.toml" --threads 1 --min-seconds 0.1 --min-steps 3 \
  --python /bin/false >"$WORK/mine.out" 2>&1 || { cat "$WORK/mine.out"; fail "bench compute of a spec of its own failed"; }
grep -qF "no PyTorch reference for a model spec of its own ($WORK/mine.toml)" "$WORK/mine.out" ||
  { cat "$WORK/mine.out"; fail "bench compute did not say a spec of its own has no PyTorch reference"; }
if grep -q "bench_torch.py --models" "$WORK/mine.out"; then fail "bench compute ran the PyTorch reference for a spec of its own"; fi
# train says when the loss grew without becoming infinite, and when --threads exceeds the CPUs.
timeout 60 "$PSBED" train --steps 3 --lr 16 --no-eval >"$WORK/rose.out" 2>&1 || { cat "$WORK/rose.out"; fail "train --lr 16 failed"; }
grep -q "the loss rose from .* (step 1) to .*: lower --lr" "$WORK/rose.out" || { cat "$WORK/rose.out"; fail "no word on the loss that rose"; }
cpus=$(nproc)
timeout 60 "$PSBED" train --steps 2 --threads $((cpus + 1)) --no-eval >"$WORK/threads.out" 2>&1 || fail "train --threads failed"
grep -qF -- "--threads $((cpus + 1)) is more than this host's $cpus CPUs" "$WORK/threads.out" ||
  { cat "$WORK/threads.out"; fail "no word on more threads than CPUs"; }
# Endpoints: a port out of range is refused at once (ZeroMQ's connect retried it for ever), and a
# bind that fails says why: in use, or no interface of this host has the address.
refused "--coordinator: cannot connect to 'tcp://127.0.0.1:99999': port 99999 is out of range, expected 1 to 65535" \
  worker --coordinator tcp://127.0.0.1:99999
refused "cannot bind 'tcp://127.0.0.1:70000': port 70000 is out of range, expected 1 to 65535 (or * for any free port)" \
  server --bind tcp://127.0.0.1:70000
refused "(no network interface of this host has that address)" coordinator --bind tcp://192.0.2.1:7000
port=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')
python3 -c 'import socket, sys, time; s=socket.socket(); s.bind(("127.0.0.1", int(sys.argv[1]))); s.listen(); time.sleep(30)' "$port" &
holder=$!
PIDS+=("$holder")
for _ in $(seq 50); do python3 -c 'import socket,sys; socket.create_connection(("127.0.0.1", int(sys.argv[1])), 0.2)' "$port" 2>/dev/null && break; sleep 0.1; done
refused "Address already in use (another process listens there: give another port, or * for any free one)" \
  coordinator --bind "tcp://127.0.0.1:$port"
kill "$holder" 2>/dev/null || true
echo "PASS"
