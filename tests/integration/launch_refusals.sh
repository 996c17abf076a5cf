#!/usr/bin/env bash
# `psbed launch` refuses settings a run cannot start with before it starts anything: one line
# naming the flag, exit status 1, no run folder; so do standalone nodes given a bad link. Then a
# finished run's folder is not launched into again (its results would be overwritten).
source "$(dirname "$0")/lib.sh"
base=(--model lenet5 --workers 1)
refused() {  # refused EXPECTED-TEXT FLAGS...: the launch fails at once, saying EXPECTED-TEXT
  local want=$1; shift
  local out="$WORK/refused-$RANDOM"
  local data=(--data synthetic) batch=(--batch 16)
  [[ " $* " == *" --data "* ]] && data=()
  [[ " $* " == *" --batch "* ]] && batch=()
  if timeout 30 "$PSBED" launch "${base[@]}" "${data[@]}" "${batch[@]}" --steps 20 "$@" --out "$out" >"$WORK/refused.out" 2>&1; then
    fail "launch $* was accepted"
  fi
  grep -qF -- "$want" "$WORK/refused.out" || { cat "$WORK/refused.out"; fail "launch $*: no '$want' in the error"; }
  [ "$(grep -c . "$WORK/refused.out")" -le 2 ] || { cat "$WORK/refused.out"; fail "launch $*: more than a short error"; }
  [ ! -e "$out" ] || fail "launch $* created its run folder before refusing"
}
refused "--batch must be at least 1" --batch 0
refused "bad --straggler worker-1: the cluster has 1 worker(s)" --straggler worker-1:compute=2x
refused "compute takes a factor of 1 or more with an x" --straggler worker-0:compute=2
refused "unknown key 'speed', expected compute or bandwidth" --straggler worker-0:speed=2x
refused "worker-0 is given twice" --straggler worker-0:compute=2x --straggler worker-0:bandwidth=1gbit
refused "--apply-threads: Value 0 not in range" --apply-threads 0
refused "--lr: expected a learning rate, 0 or more, got 'nan'" --lr nan
refused "--lr: expected a learning rate, 0 or more, got '0x10'" --lr 0x10
refused "--weight-decay: expected a weight decay, 0 or more, got '1e40'" --weight-decay 1e40
refused "--momentum: expected a momentum, 0 or more and below 1" --momentum 1.5
refused "--partition-bytes must be at least 4 bytes" --partition-bytes 0
refused "--heartbeat-timeout must be at least twice --heartbeat" --heartbeat 2 --heartbeat-timeout 0.5
refused "unknown data set 'bogus'" --data bogus
refused "--threads must be 1 to 4096, got 10000" --threads 10000
refused "--profile $SRC/tests/fixtures/predictor/regression/profile.json: its run used batches of 32, this run --batch 16" \
  --profile "$SRC/tests/fixtures/predictor/regression/profile.json"
refused "bad bandwidth '100': give its unit" --bandwidth 100
refused "--servers 11: lenet5 has 10 parts" --servers 11
# --save-params is written by the worker after the run: a path it cannot write is refused first.
refused "--save-params: '$WORK' is a folder, expected a file name" --save-params "$WORK"
refused "missing file $WORK/empty/train-images-idx3-ubyte" --data mnist --data-dir "$WORK/empty"
refused "cannot read profile '$WORK/none.json'" --compute "replay:$WORK/none.json"
refused "cannot read profile '$WORK/none.json'" --profile "$WORK/none.json"
echo '{"format": "psbed-profile/1", "model": "lenet5"' >"$WORK/broken.json"
refused "profile '$WORK/broken.json' is not valid JSON" --profile "$WORK/broken.json"
echo "refusals: one line each, nothing started"

# A node started on its own refuses a bad link at once, not after it has joined a cluster (here
# there is none to join: the error must come before the 30 s --connect-timeout).
node_refused() {  # node_refused EXPECTED-TEXT ARGS...
  local want=$1; shift
  local start=$SECONDS
  if timeout 60 "$PSBED" "$@" --coordinator tcp://127.0.0.1:9 --connect-timeout 30 >"$WORK/node.out" 2>&1; then
    fail "$* was accepted"
  fi
  grep -qF -- "$want" "$WORK/node.out" || { cat "$WORK/node.out"; fail "$*: no '$want' in the error"; }
  [ $((SECONDS - start)) -lt 10 ] || fail "$*: refused only after $((SECONDS - start)) s"
}
node_refused "bad bandwidth 'fast'" worker --model lenet5 --data synthetic --bandwidth fast
node_refused "bad duration '1parsec'" worker --model lenet5 --data synthetic --latency 1parsec
node_refused "bad bandwidth 'fast'" server --bandwidth fast
echo "standalone nodes: a bad link refused before joining"

timeout 120 "$PSBED" launch "${base[@]}" --data synthetic --batch 16 --steps 10 --apply-threads 3 --credit 2MiB \
  --out "$WORK/run" >"$WORK/run.out" 2>&1 || { tail -20 "$WORK/run.out"; fail "the run failed"; }
# A policy setting the policy does not use is kept (a switch may use it) but said, once.
[ "$(grep -c -- "--credit 2MiB: policy wfbp does not use it" "$WORK/run.out")" = 1 ] ||
  { head -5 "$WORK/run.out"; fail "no single word that wfbp does not use --credit"; }
# --apply-threads reaches the shard, and the summary records it (validate predicts with it).
grep -q "3 apply lane(s)" "$WORK/run/logs/server-0.log" || fail "--apply-threads 3 did not reach the shard"
json "$WORK/run/summary.json" 'sys.exit(0 if s["launch"]["apply_threads"] == 3 else 1)' || fail "apply_threads not in the summary"
before=$(md5sum <"$WORK/run/summary.json")
if timeout 30 "$PSBED" launch "${base[@]}" --data synthetic --batch 16 --steps 10 --out "$WORK/run" >"$WORK/again.out" 2>&1; then
  fail "a launch into a finished run's folder was accepted"
fi
grep -q "holds a run already" "$WORK/again.out" || { cat "$WORK/again.out"; fail "no reason for refusing the folder"; }
[ "$(md5sum <"$WORK/run/summary.json")" = "$before" ] || fail "the earlier run's summary.json changed"
# A run that left no summary (every process killed) left its traces: a new run is not put beside
# them (its folder would read as one run of more workers).
cp -r "$WORK/run" "$WORK/stale" && rm "$WORK/stale/summary.json"
if timeout 30 "$PSBED" launch "${base[@]}" --data synthetic --batch 16 --steps 10 --out "$WORK/stale" >"$WORK/stale.out" 2>&1; then
  fail "a launch into a folder holding an earlier run's traces was accepted"
fi
grep -q "holds an earlier run's traces (it left no summary.json)" "$WORK/stale.out" ||
  { cat "$WORK/stale.out"; fail "no reason for refusing a folder with stale traces"; }
# An --out that cannot be a folder is named as the flag, not as a library's error.
touch "$WORK/afile"
if timeout 30 "$PSBED" launch "${base[@]}" --data synthetic --batch 16 --steps 10 --out "$WORK/afile/run" >"$WORK/afile.out" 2>&1; then
  fail "a launch into a folder under a file was accepted"
fi
grep -q "^psbed: error: --out: cannot create the folder '$WORK/afile/run/logs'" "$WORK/afile.out" ||
  { cat "$WORK/afile.out"; fail "an unusable --out was not named"; }
echo "PASS"
