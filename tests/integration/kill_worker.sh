#!/usr/bin/env bash
# SIGKILL one worker during an async run: the others finish, the coordinator names the dead
# worker, and the summary reports it.
source "$(dirname "$0")/lib.sh"
need_data
timeout 300 "$PSBED" launch --servers 1 --workers 3 --model lenet5 --data mnist --steps 2000 --batch 32 \
  --lr 0.01 --mode async --heartbeat-timeout 2 --out "$WORK/run" >"$WORK/run.out" 2>&1 &
PIDS+=($!)
victim=$(node_pid worker-1)
[ -n "$victim" ] || fail "worker-1 never started"
sleep 1
kill -KILL "$victim"
wait "${PIDS[0]}" || true
cat "$WORK/run.out" | tail -15
grep -q "worker-1 (worker .*) is dead" "$WORK/run.out" || fail "the coordinator did not name the dead worker"
json "$WORK/run/summary.json" '[f["name"] for f in s["failed_nodes"]]' | grep -q "worker-1" || fail "summary lacks the dead worker"
json "$WORK/run/summary.json" 'sys.exit(0 if s["ok"] else 1)' || fail "the run did not finish"
alive=$(json "$WORK/run/summary.json" 'sum(1 for w in s["per_worker"] if w["alive"] and w.get("steps") == 2000)')
[ "$alive" -eq 2 ] || fail "expected the 2 other workers to finish all steps, got $alive"
# Every reaped process has its CPU time, the killed one too; the workers that trained used some.
json "$WORK/run/summary.json" 'sys.exit(0 if s["launch"]["host_cpus"] >= 1 and all(p["cpu_s"] is not None and p["cpu_s"] >= 0 for p in s["launch"]["processes"]) and all(p["cpu_s"] > 0.1 for p in s["launch"]["processes"] if p["name"] in ("worker-0", "worker-2")) else 1)' ||
  fail "summary lacks per-process CPU seconds"
echo "PASS"
