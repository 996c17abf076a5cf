#!/usr/bin/env bash
# Sufficient-factor broadcasting in whole runs: 2 servers + 3 workers train lenet5 with
# --comm hybrid in bsp to >= 95% test accuracy; the MLP trains with --comm sfb in ssp:2; and a
# worker killed in the middle of a bsp run with --comm sfb stops the run with a message naming it
# (bsp cannot go on without its factors), rather than leaving its peers waiting. With a link rate
# hybrid weighs messages too: the MLP's small fc3 goes as factors at 1 Gbit/s with 2 workers and
# stays on the shards at 100 Mbit/s, in the run and in its prediction alike.
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
for rate in 1gbit:sfb 100mbit:ps; do
  timeout 120 "$PSBED" launch --servers 2 --workers 2 --model mlp --data mnist --steps 4 --batch 32 \
    --mode bsp --comm hybrid --bandwidth "${rate%%:*}" --no-trace --out "$WORK/h-${rate%%:*}" \
    >"$WORK/h.out" 2>&1 || { cat "$WORK/h.out"; fail "launch mlp --comm hybrid --bandwidth ${rate%%:*}"; }
  python3 - "$WORK/h-${rate%%:*}/summary.json" "${rate#*:}" <<'PY' || fail "hybrid's route at ${rate%%:*}"
import json, sys
for w in json.load(open(sys.argv[1]))["per_worker"]:
    fc3 = w["comm"]["layers"][2]
    assert fc3["layer"] == "fc3" and fc3["route"] == sys.argv[2], fc3
    # 4 messages per tensor (weights, bias) at a shard serving one worker's share; 2 factor ones.
    assert fc3["ps_messages"] == 8 and fc3["sfb_messages"] == 2, fc3
    assert (fc3["sfb_s"] < fc3["ps_s"]) == (sys.argv[2] == "sfb"), fc3
print(f"hybrid: fc3 {fc3['route']}: {fc3['sfb_s'] * 1e6:.0f} us as factors, {fc3['ps_s'] * 1e6:.0f} us through the shards")
PY
  timeout 60 "$PSBED" predict --profile "$SRC/docs/grid/sfb-hybrid/profile-mlp.json" --workers 2 \
    --servers 2 --mode bsp --comm hybrid --bandwidth "${rate%%:*}" --steps 5 --seeds 1 \
    --json "$WORK/h.json" >"$WORK/hp.out" 2>&1 || { cat "$WORK/hp.out"; fail "predict --comm hybrid"; }
  json "$WORK/h.json" "sys.exit(0 if 'fc3 ${rate#*:} ' in s[0]['comm_layers'] else 1)" ||
    { cat "$WORK/hp.out"; fail "predict routes fc3 otherwise than the run at ${rate%%:*}"; }
done
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
