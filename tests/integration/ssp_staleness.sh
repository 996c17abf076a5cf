#!/usr/bin/env bash
# ssp:2 with a deliberate straggler: from the workers' traces, no worker ever computes a step
# more than 2 clocks ahead of what the slowest had pushed.
source "$(dirname "$0")/lib.sh"
need_data
timeout 300 "$PSBED" launch --servers 2 --workers 3 --model lenet5 --data mnist --steps 60 --batch 32 --lr 0.01 \
  --mode ssp:2 --straggler-ms 25 --out "$WORK/run" >"$WORK/run.out" 2>&1 || { cat "$WORK/run.out"; fail "launch failed"; }
python3 - "$WORK/run/traces" 2 <<'PY'
import json, os, sys
folder, K = sys.argv[1], int(sys.argv[2])
workers = {}
for f in os.listdir(folder):
    if not f.startswith("worker-"):
        continue
    doc = json.load(open(os.path.join(folder, f)))
    lanes = {e["tid"]: e["args"]["name"] for e in doc["traceEvents"] if e.get("ph") == "M" and e["name"] == "thread_name"}
    ev = [e for e in doc["traceEvents"] if e.get("ph") in ("X", "b")]  # transfers: async begins
    fwd_last = {}   # step -> start of the last layer's forward (all parts of the step arrived)
    push_done = {}  # step -> start of the step's last push
    for e in ev:
        s = e["args"].get("step")
        if e["name"].startswith("fwd:"):
            fwd_last[s] = max(fwd_last.get(s, 0), e["ts"])
        if e.get("cat") == "push":
            push_done[s] = max(push_done.get(s, 0), e["ts"])
    workers[f.split(".")[0]] = (fwd_last, sorted(push_done.values()))
assert len(workers) == 3, workers.keys()
worst = -10**9
for w, (fwd_last, _) in workers.items():
    for s, t in fwd_last.items():
        for v, (_, pushes) in workers.items():
            if v == w:
                continue
            completed = sum(1 for p in pushes if p <= t)
            worst = max(worst, s - completed)
            if s - completed > K:
                sys.exit(f"{w} computed step {s} when {v} had pushed only {completed} steps (staleness bound {K})")
print(f"largest lead over the slowest worker: {worst} clock(s) (bound {K})")
sys.exit(0 if worst >= 1 else f"the straggler never held anyone back (lead {worst}): the test shows nothing")
PY
echo "PASS"
