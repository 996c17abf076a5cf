#!/usr/bin/env bash
# Sufficient-factor broadcasting in whole runs: 2 servers + 3 workers train lenet5 with
# --comm hybrid in bsp to >= 95% test accuracy; the MLP trains with --comm sfb in ssp:2; and a
# worker killed in the middle of a bsp run with --comm sfb stops the run with a message naming it
# (bsp cannot go on without its factors), rather than leaving its peers waiting.
source "$(dirname "$0")/lib.sh"
need_data
timeout 300 "$PSBED" launch --servers 2 --workers 3 --model lenet5 --data mnist --epochs 3 --batch 32 \
  --lr 0.05 --mode bsp --comm hybrid --out "$WORK/acc" >"$WORK/acc.out" 2>&1 \
  || { cat "$WORK/acc.out"; fail "launch lenet5 --comm hybrid failed"; }
acc=$(json "$WORK/acc/summary.json" 's["test_accuracy"]')
echo "lenet5 bsp hybrid: test accuracy $acc"
python3 -c "import sys; sys.exit(0 if float('$acc') >= 0.95 else 1)" || fail "test accuracy $acc < 0.95"
# The traces show the factor sends and the rebuilds; the metadata the route of each fc layer.
python3 - "$WORK/acc/traces/worker-1.trace.json" <<'PY' || fail "the trace lacks the factor exchange"
import json, sys
t = json.load(open(sys.argv[1]))
names = {e.get("name", "") for e in t["traceEvents"]}
assert any(n.startswith("factors:fc1") for n in names), "no factors:fc1 event"
assert any(n.startswith("rebuild:fc1") for n in names), "no rebuild:fc1 event"
routes = {l["layer"]: l["route"] for l in t["metadata"]["comm"]["layers"]}
assert routes == {"fc1": "sfb", "fc2": "sfb", "fc3": "ps"}, routes
print("trace: factor sends and rebuilds, routes", routes)
PY
timeout 300 "$PSBED" launch --servers 2 --workers 3 --model mlp --data mnist --epochs 2 --batch 32 \
  --lr 0.05 --mode ssp:2 --comm sfb --no-trace --out "$WORK/ssp" >"$WORK/ssp.out" 2>&1 \
  || { cat "$WORK/ssp.out"; fail "launch mlp ssp:2 --comm sfb failed"; }
echo "mlp ssp:2 sfb: test accuracy $(json "$WORK/ssp/summary.json" 's["test_accuracy"]')"
json "$WORK/ssp/summary.json" '"ok" if s["test_accuracy"] > 0.9 and all(w["final_loss"] < w["first_loss"] / 2 for w in s["per_worker"]) else sys.exit(1)' \
  >/dev/null || fail "mlp ssp:2 sfb did not learn"
# A dead peer: its factors never come. The coordinator declares it dead; the others stop, naming it.
timeout 120 "$PSBED" launch --servers 1 --workers 3 --model mlp --data mnist --steps 100000 --batch 32 \
  --lr 0.05 --mode bsp --comm sfb --heartbeat-timeout 2 --out "$WORK/run" >"$WORK/run.out" 2>&1 &
PIDS+=($!)
victim=$(node_pid worker-2)
[ -n "$victim" ] || fail "worker-2 never started"
sleep 1
kill -KILL "$victim"
wait "${PIDS[0]}" || true
grep -q "worker-2 died: bsp cannot go on without its factors of fc" "$WORK/run/logs/worker-0.log" \
  || { tail -20 "$WORK/run.out"; fail "worker-0 did not stop naming the dead worker-2"; }
grep -q "worker-2 died: bsp cannot go on" "$WORK/run.out" || fail "the run's output does not name worker-2"
echo "dead peer: $(grep -h -o "worker-2 died: bsp cannot go on without its factors of [a-z0-9]*" "$WORK/run/logs/worker-0.log" | head -1)"
echo "PASS"
