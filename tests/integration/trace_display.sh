#!/usr/bin/env bash
# Traces a viewer displays right: a 4-worker p3 run's traces keep complete events of a thread
# nested, transfers as async begin/end pairs, flows from a push through the shard's apply to the
# next pull, and counter tracks; `psbed trace merge` makes one file of them; the predictor's
# synthetic traces follow the same rules.
source "$(dirname "$0")/lib.sh"
CHECK="$SRC/tests/integration/trace_check.py"
timeout 180 "$PSBED" launch --servers 2 --workers 4 --model lenet5 --data synthetic --steps 20 --batch 16 \
  --threads 1 --mode bsp --policy p3 --slice-params 4096 --out "$WORK/run" >"$WORK/run.out" 2>&1 ||
  { tail -20 "$WORK/run.out"; fail "the traced run failed"; }
ls "$WORK"/run/traces/*.trace.json >/dev/null || fail "the run left no traces"
python3 "$CHECK" "$WORK"/run/traces/*.trace.json --flows --counters >"$WORK/check.out" 2>&1 ||
  { cat "$WORK/check.out"; fail "the run's traces break a display rule"; }
cat "$WORK/check.out"
grep -q "async transfers ([1-9][0-9]* in flight with an earlier one)" "$WORK/check.out" ||
  fail "no two transfers were in flight together: the test shows nothing"
# Each node measured its clock against the coordinator's; on one host they share it.
python3 - "$WORK"/run/traces/*.trace.json <<'PY' || fail "a node recorded no clock sync"
import json, sys
for f in sys.argv[1:]:
    s = json.load(open(f))["metadata"]["clock_sync"]
    assert s["same_clock"] is True and s["offset_us"] == 0 and s["rtt_us"] >= 0, (f, s)
PY

"$PSBED" trace merge "$WORK/run" >"$WORK/merge.out" 2>&1 || { cat "$WORK/merge.out"; fail "trace merge failed"; }
grep -q "merged 6 traces" "$WORK/merge.out" || { cat "$WORK/merge.out"; fail "trace merge did not merge the 6 nodes"; }
grep -q "every node on the coordinator's clock" "$WORK/merge.out" || { cat "$WORK/merge.out"; fail "merge moved a clock on one host"; }
python3 "$CHECK" "$WORK/run/trace.json" --flows --counters >"$WORK/check-merged.out" 2>&1 ||
  { cat "$WORK/check-merged.out"; fail "the merged trace breaks a display rule"; }
python3 - "$WORK/run/trace.json" "$WORK"/run/traces/*.trace.json <<'PY' || fail "the merged trace is not the run's traces together"
import json, sys
merged = json.load(open(sys.argv[1]))
parts = [json.load(open(f)) for f in sys.argv[2:]]
assert len(merged["traceEvents"]) == sum(len(p["traceEvents"]) for p in parts)
procs = {e["args"]["name"] for e in merged["traceEvents"] if e.get("ph") == "M" and e["name"] == "process_name"}
assert procs == {"server-0", "server-1", "worker-0", "worker-1", "worker-2", "worker-3"}, procs
assert set(merged["metadata"]["nodes"]) == procs
PY
# Bad input: a folder without traces, a trace that is not JSON.
mkdir -p "$WORK/empty/traces"
"$PSBED" trace merge "$WORK/empty" >"$WORK/bad.out" 2>&1 && fail "merging no traces succeeded"
grep -q "holds no NODE.trace.json file" "$WORK/bad.out" || { cat "$WORK/bad.out"; fail "no reason for refusing an empty folder"; }
echo '{"traceEvents": [' >"$WORK/empty/traces/worker-0.trace.json"
"$PSBED" trace merge "$WORK/empty" >"$WORK/bad.out" 2>&1 && fail "a broken trace was merged"
grep -q "worker-0.trace.json' is not JSON" "$WORK/bad.out" || { cat "$WORK/bad.out"; fail "the broken file is not named"; }

# The predictor's synthetic traces.
timeout 120 "$PSBED" profile "$WORK/run" --worker worker-0 -o "$WORK/profile.json" >"$WORK/profile.out" 2>&1 ||
  { cat "$WORK/profile.out"; fail "profile of the traced run failed"; }
timeout 120 "$PSBED" predict --profile "$WORK/profile.json" --workers 4 --servers 2 --policy p3 --mode bsp \
  --steps 20 --trace-out "$WORK/sim" >"$WORK/predict.out" 2>&1 || { cat "$WORK/predict.out"; fail "predict --trace-out failed"; }
python3 "$CHECK" "$WORK"/sim/*.trace.json >"$WORK/check-sim.out" 2>&1 ||
  { cat "$WORK/check-sim.out"; fail "the synthetic traces break a display rule"; }
cat "$WORK/check-sim.out"
echo "PASS"
