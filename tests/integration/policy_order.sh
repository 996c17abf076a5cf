#!/usr/bin/env bash
# The live worker hands a step's pulls to the policy together, so the policy orders them: under
# wfbp the parameters are requested in plan order (layers from the input) every step; under
# tf-random in a random order that changes from step to step (ICPE 2020's TensorFlow), as the
# simulator has it. The trace's pull events start when their request is issued.
source "$(dirname "$0")/lib.sh"
for policy in wfbp tf-random; do
  timeout 120 "$PSBED" launch --servers 1 --workers 1 --model lenet5 --data synthetic --steps 30 --batch 32 \
    --mode bsp --policy "$policy" --bandwidth 100mbit --out "$WORK/$policy" >"$WORK/$policy.out" 2>&1 &
  PIDS+=($!)
  wait "${PIDS[-1]}" || { tail -20 "$WORK/$policy.out"; fail "the $policy run failed"; }
done
python3 - "$WORK/wfbp/traces/worker-0.trace.json" "$WORK/tf-random/traces/worker-0.trace.json" <<'PY' ||
import collections, json, sys

def request_orders(path):
    steps = collections.defaultdict(list)
    for e in json.load(open(path))["traceEvents"]:
        if e.get("ph") == "b" and e["name"].startswith("pull:"):  # transfers: async begins
            a = e["args"]
            steps[a["step"]].append((e["ts"], a["key"], a["part"]))
    return {s: [(k, p) for _, k, p in sorted(v)] for s, v in steps.items() if s > 0}

fifo, shuffled = request_orders(sys.argv[1]), request_orders(sys.argv[2])
# 30 steps, step 0 left out: too few steps traced would let every check below pass on nothing.
assert len(fifo) >= 20 and len(shuffled) >= 20, (len(fifo), len(shuffled))
plan = sorted(next(iter(fifo.values())))
assert all(order == plan for order in fifo.values()), "wfbp pulls left plan order"
out_of_plan = sum(order != plan for order in shuffled.values())
distinct = len({tuple(order) for order in shuffled.values()})
print(f"tf-random: {out_of_plan} of {len(shuffled)} steps out of plan order, {distinct} distinct orders")
assert out_of_plan >= len(shuffled) // 2, "tf-random pulls are mostly requested in plan order"
assert distinct >= len(shuffled) // 2, "tf-random repeats the same order"
PY
  fail "pull request order"
echo "PASS"
