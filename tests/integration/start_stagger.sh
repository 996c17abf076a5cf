#!/usr/bin/env bash
# launch --start-stagger-ms T: worker i of N waits i x T / N before its first step, its trace
# shows the wait ("start-delay" on the compute lane) and the stagger in its metadata, which
# `psbed validate` reads to simulate the run as it started.
source "$(dirname "$0")/lib.sh"
timeout 120 "$PSBED" launch --servers 1 --workers 2 --model lenet5 --data synthetic --steps 20 --batch 32 \
  --mode async --start-stagger-ms 400 --out "$WORK/run" >"$WORK/run.out" 2>&1 &
PIDS+=($!)
wait "${PIDS[0]}" || { tail -20 "$WORK/run.out"; fail "the run failed"; }
python3 - "$WORK/run/traces" <<'PY' || fail "start delays"
import json, sys
def load(w):
    t = json.load(open(f"{sys.argv[1]}/{w}.trace.json"))
    ev = [e for e in t["traceEvents"] if e.get("ph") == "X"]
    delay = [e for e in ev if e["name"] == "start-delay"]
    first = min(e["ts"] for e in ev if e["name"].startswith("fwd:") and e["args"]["step"] == 0)
    return t["metadata"]["start_stagger_ms"], delay, first
# Worker ids follow registration, not names: one of the two is worker 0 of 2 (no wait), the
# other worker 1 of 2 (200 ms).
(s0, d0, f0), (s1, d1, f1) = sorted([load("worker-0"), load("worker-1")], key=lambda r: r[1][0]["dur"])
assert s0 == s1 == 400, (s0, s1)
assert len(d0) == len(d1) == 1
assert d0[0]["dur"] < 20e3, d0
assert 190e3 <= d1[0]["dur"] <= 260e3, d1
assert f1 - f0 >= 150e3, (f1 - f0)
print(f"the second worker waited {d1[0]['dur'] / 1e3:.0f} ms; its first forward came {(f1 - f0) / 1e3:.0f} ms after the first's")
PY
# summary.json keeps the run's settings for `psbed validate` (which reads it for runs without
# traces): the stagger, no straggler, an unshaped link.
json "$WORK/run/summary.json" \
  'sys.exit(0 if (s["launch"]["start_stagger_ms"], s["launch"]["straggler_ms"], s["launch"]["link"]) == (400, 0, "unshaped") else 1)' ||
  { json "$WORK/run/summary.json" 's["launch"]'; fail "summary.json does not record the stagger and the link"; }
echo "PASS"
