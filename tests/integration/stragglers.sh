#!/usr/bin/env bash
# launch --straggler: worker-1 with compute=3x computes three times as long (replayed compute,
# scaled), which its trace shows and summary.json records; worker-0 with bandwidth=1mbit has
# its own link at that rate, and predict and validate take the same setting.
source "$(dirname "$0")/lib.sh"
# lenet5's profiled layers, each 10 times as long: replayed sleeps of a millisecond or so,
# which the timer's overhead per sleep (tens of microseconds) does not blur.
PROFILE="$WORK/profile-lenet5-x10.json"
python3 - "$SRC/docs/grid/lenet5/profile-lenet5.json" "$PROFILE" <<'PY'
import json, sys
p = json.load(open(sys.argv[1]))
for layer in p["layers"]:
    for key in ("forward_ms", "backward_ms"):
        layer[key] = [10 * v for v in layer[key]]
json.dump(p, open(sys.argv[2], "w"))
PY
COMMON=(--servers 1 --workers 2 --model lenet5 --data synthetic --batch 32 --mode async
  --compute "replay:$PROFILE")
timeout 120 "$PSBED" launch "${COMMON[@]}" --steps 20 --straggler worker-1:compute=3x \
  --out "$WORK/slow" >"$WORK/slow.out" 2>&1 &
PIDS+=($!)
wait "${PIDS[0]}" || { tail -20 "$WORK/slow.out"; fail "the compute=3x run failed"; }
json "$WORK/slow/summary.json" \
  'sys.exit(0 if s["launch"]["stragglers"] == [{"worker": 1, "compute_factor": 3.0, "bandwidth_bytes_per_sec": 0.0}] and s["launch"]["straggler_ms"] == 0 else 1)' ||
  { json "$WORK/slow/summary.json" 's["launch"]'; fail "summary.json does not record the straggler"; }
# A 3x effect asserted at 2x: the replayed sleeps are scaled, so this is structural.
python3 - "$WORK/slow/traces" <<'PY' || fail "worker-1's compute is not the longer one"
import json, statistics, sys
def load(w):
    t = json.load(open(f"{sys.argv[1]}/{w}.trace.json"))
    per_step = {}
    for e in t["traceEvents"]:
        if e.get("ph") == "X" and e["name"].startswith(("fwd:", "bwd:")):
            per_step[e["args"]["step"]] = per_step.get(e["args"]["step"], 0) + e["dur"]
    return t["metadata"]["straggler"], statistics.median(per_step.values())
(m0, c0), (m1, c1) = load("worker-0"), load("worker-1")
assert m0["compute_factor"] == 1 and m1["compute_factor"] == 3, (m0, m1)
assert c1 > 2 * c0, (c0, c1)
print(f"median fwd+bwd per step: worker-0 {c0 / 1e3:.2f} ms, worker-1 {c1 / 1e3:.2f} ms")
PY
# validate reads the run's stragglers and gives them a column.
timeout 120 "$PSBED" validate --profile "$PROFILE" "$WORK/slow" --steps 20 --seeds 1 --python /bin/false \
  --out "$WORK/report" >"$WORK/v.out" 2>&1 || { cat "$WORK/v.out"; fail "validate"; }
grep -q "| worker-1:compute=3x |" "$WORK/report/validation.md" ||
  { cat "$WORK/report/validation.md"; fail "validation.md has no stragglers column"; }

# worker-0's own link at 1 Mbit/s (lenet5's model is ~250 KB each way: a few steps only).
timeout 120 "$PSBED" launch "${COMMON[@]}" --steps 3 --straggler worker-0:bandwidth=1mbit \
  --out "$WORK/narrow" >"$WORK/narrow.out" 2>&1 &
PIDS+=($!)
wait "${PIDS[1]}" || { tail -20 "$WORK/narrow.out"; fail "the bandwidth=1mbit run failed"; }
json "$WORK/narrow/summary.json" \
  'sys.exit(0 if s["launch"]["stragglers"] == [{"worker": 0, "compute_factor": 1.0, "bandwidth_bytes_per_sec": 125000.0}] and s["launch"]["link"] == "unshaped" else 1)' ||
  { json "$WORK/narrow/summary.json" 's["launch"]'; fail "summary.json does not record the straggler"; }
# The trace keeps the cluster's link (validate reads it from worker-0) and says its own.
json "$WORK/narrow/traces/worker-0.trace.json" \
  'sys.exit(0 if s["metadata"]["link"] == "unshaped" and s["metadata"]["straggler"]["bandwidth_bytes_per_sec"] == 125000 else 1)' ||
  fail "worker-0's trace does not record its own link"
timeout 120 "$PSBED" predict --profile "$PROFILE" --workers 2 --mode async --policy wfbp --steps 20 \
  --straggler worker-0:bandwidth=1mbit --json "$WORK/predict.json" >"$WORK/predict.out" 2>&1 ||
  { cat "$WORK/predict.out"; fail "predict --straggler"; }
grep -q "stragglers: worker-0:bandwidth=1mbit" "$WORK/predict.out" || { cat "$WORK/predict.out"; fail "predict does not say its stragglers"; }
echo "PASS"
