#!/usr/bin/env bash
# During an async run, SIGKILL one worker and stop another with SIGTERM: the others finish, the
# coordinator names both, and the summary reports them; the aggregate is the figures of the
# workers that trained to the end (the stopped one's report of its steps so far is kept beside
# its failure, not added to theirs).
source "$(dirname "$0")/lib.sh"
need_data
timeout 300 "$PSBED" launch --servers 1 --workers 4 --model lenet5 --data mnist --steps 2000 --batch 32 \
  --lr 0.01 --mode async --heartbeat-timeout 2 --out "$WORK/run" >"$WORK/run.out" 2>&1 &
PIDS+=($!)
victim=$(node_pid worker-1)
stopped=$(node_pid worker-3)
[ -n "$victim" ] && [ -n "$stopped" ] || fail "worker-1 or worker-3 never started"
sleep 1
kill -KILL "$victim"
kill -TERM "$stopped"
wait "${PIDS[0]}" || true
cat "$WORK/run.out" | tail -15
grep -q "worker-1 (worker .*) is dead" "$WORK/run.out" || fail "the coordinator did not name the dead worker"
s="$WORK/run/summary.json"
json "$s" '[f["name"] for f in s["failed_nodes"]]' | grep -q "worker-1" || fail "summary lacks the dead worker"
json "$s" '[f["name"] for f in s["failed_nodes"]]' | grep -q "worker-3" || fail "summary lacks the stopped worker"
json "$s" 'sys.exit(0 if s["ok"] else 1)' || fail "the run did not finish"
alive=$(json "$s" 'sum(1 for w in s["per_worker"] if w["alive"] and w.get("steps") == 2000)')
[ "$alive" -eq 2 ] || fail "expected the 2 other workers to finish all steps, got $alive"
# The stopped worker reported its steps so far and its reason; the aggregate is the others'.
json "$s" '[w for w in s["per_worker"] if w["name"] == "worker-3"][0]["failure"]' | grep -q "stopped by SIGTERM" ||
  fail "worker-3's failure is not its SIGTERM"
json "$s" 'sys.exit(0 if 0 < [w for w in s["per_worker"] if w["name"] == "worker-3"][0]["steps"] < 2000 else 1)' ||
  fail "worker-3's report of its steps is missing"
json "$s" 'sys.exit(0 if abs(s["steps_per_sec"] - sum(w["steps_per_sec"] for w in s["per_worker"] if w["alive"])) < 1e-6 * s["steps_per_sec"] else 1)' ||
  fail "the aggregate is not the figures of the workers that trained to the end"
# Every reaped process has its CPU time, the killed one too; the workers that trained used some.
json "$s" 'sys.exit(0 if s["launch"]["host_cpus"] >= 1 and all(p["cpu_s"] is not None and p["cpu_s"] >= 0 for p in s["launch"]["processes"]) and all(p["cpu_s"] > 0.1 for p in s["launch"]["processes"] if p["name"] in ("worker-0", "worker-2")) else 1)' ||
  fail "summary lacks per-process CPU seconds"
echo "PASS"
