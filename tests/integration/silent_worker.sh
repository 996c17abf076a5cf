#!/usr/bin/env bash
# A worker that goes silent (SIGSTOP) past the heartbeat timeout is declared dead; when it wakes
# (SIGCONT) it is told to stop, its late pushes are refused, and the run still finishes.
source "$(dirname "$0")/lib.sh"
need_data
timeout 300 "$PSBED" launch --servers 1 --workers 3 --model lenet5 --data mnist --steps 1500 --batch 32 \
  --lr 0.01 --mode async --heartbeat-timeout 1.5 --out "$WORK/run" >"$WORK/run.out" 2>&1 &
PIDS+=($!)
victim=$(node_pid worker-2)
[ -n "$victim" ] || fail "worker-2 never started"
sleep 0.5
kill -STOP "$victim"
sleep 3
kill -CONT "$victim"
wait "${PIDS[0]}" || true
grep -q "worker-2 (worker .*) is dead" "$WORK/run.out" || fail "the coordinator did not declare the silent worker dead"
json "$WORK/run/summary.json" 'sys.exit(0 if s["ok"] else 1)' || { tail -20 "$WORK/run.out"; fail "the run did not finish"; }
done=$(json "$WORK/run/summary.json" 'sum(1 for w in s["per_worker"] if w["alive"] and w.get("steps") == 1500)')
[ "$done" -eq 2 ] || fail "expected the 2 other workers to finish, got $done"
# The woken worker ended by itself (told to stop), not by the launcher's kill.
grep -q "worker-2.*killed by signal" "$WORK/run.out" && fail "worker-2 had to be killed"
echo "worker-2 after waking: $(tail -2 "$WORK/run/logs/worker-2.log" | tr '\n' ' ')"
echo "PASS"
