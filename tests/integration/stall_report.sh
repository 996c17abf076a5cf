#!/usr/bin/env bash
# A stall is reported: with the only shard frozen (SIGSTOP), no worker finishes a step, and after
# --stall-timeout the coordinator says so in its log, /api/status and /metrics, naming each
# worker's step and what it waits on (the layer, the oldest unanswered request and its shard);
# launch --timeout then names the stall, and the summary keeps it. Once the shard runs again,
# the coordinator says progress resumed.
source "$(dirname "$0")/lib.sh"
type -P curl >/dev/null || skip "curl is not installed (cluster/install-deps.sh test)"
timeout 120 "$PSBED" launch --servers 1 --workers 2 --model lenet5 --data synthetic --steps 100000 --batch 16 \
  --threads 1 --stall-timeout 3 --heartbeat-timeout 60 --timeout 25 --http :0 --out "$WORK/run" \
  >"$WORK/run.out" 2>&1 &
launch=$!
PIDS+=($launch)
[ -n "$(node_pid worker-1)" ] || { tail -5 "$WORK/run.out"; fail "worker-1 never started"; }
server=$(pgrep -f -- "--name server-0 .*$WORK" | head -1 || true)
[ -n "$server" ] || fail "no server-0 process"
url=$(cat "$WORK/run/logs/coordinator.http")
sleep 1
kill -STOP "$server"
for _ in $(seq 1 100); do grep -q "no progress for" "$WORK/run/logs/coordinator.log" && break; sleep 0.1; done
line=$(grep -h "no progress for" "$WORK/run/logs/coordinator.log" | tail -1)
echo "$line"
[ -n "$line" ] || fail "no stall reported within 10 s of the shard freezing"
for w in worker-0 worker-1; do
  echo "$line" | grep -q "$w at step [0-9]* waiting on .*from server-0, unanswered for" ||
    fail "the stall line does not say what $w waits on"
done
curl -s "${url}api/status" >"$WORK/status.json"
json "$WORK/status.json" 's["stall"]["seconds"] >= 3 and len(s["stall"]["workers"]) == 2' | grep -q True ||
  { cat "$WORK/status.json"; fail "/api/status does not show the stall"; }
curl -s "${url}metrics" >"$WORK/metrics"
grep -q '^psbed_stalled 1' "$WORK/metrics" || fail "/metrics does not say psbed_stalled 1"
grep -q '^psbed_progress_age_seconds [3-9]' "$WORK/metrics" || fail "/metrics: psbed_progress_age_seconds"
# The shard runs again: progress resumes, and the coordinator says so.
kill -CONT "$server"
for _ in $(seq 1 100); do grep -q "progress again after a stall" "$WORK/run/logs/coordinator.log" && break; sleep 0.1; done
grep -q "progress again after a stall" "$WORK/run/logs/coordinator.log" || fail "no word of progress resuming"
curl -s "${url}metrics" | grep -q '^psbed_stalled 0' || fail "/metrics still says stalled"
# Frozen again until --timeout: launch names the stall.
kill -STOP "$server"
set +e
wait "$launch"
rc=$?
set -e
kill -CONT "$server" 2>/dev/null || true
[ "$rc" != 0 ] || fail "a run past --timeout ended 0"
grep -q "took longer than --timeout 25 s; it had stalled: no progress for" "$WORK/run.out" ||
  { tail -5 "$WORK/run.out"; fail "launch --timeout does not name the stall"; }
json "$WORK/run/summary.json" 'len(s["stalls"])' | grep -q '^[12]$' || fail "the summary keeps no stall"
echo "PASS"
