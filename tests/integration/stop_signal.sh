#!/usr/bin/env bash
# SIGTERM (docker compose stop, kubectl delete) or SIGINT stops a hand-started node cleanly: a
# worker ends at the next step boundary, tells the coordinator it is leaving (it logs the worker
# dead at once, with the reason, instead of waiting for its heartbeats to stop), writes its
# trace, logs one line and exits 130; a server likewise. A second signal ends a node at once.
source "$(dirname "$0")/lib.sh"
# start_cluster DIR WORKERS: a coordinator, server-0 and worker-0 .. worker-(WORKERS-1).
start_cluster() {
  local dir=$1 workers=$2 i
  mkdir -p "$dir"
  "$PSBED" coordinator --bind "tcp://127.0.0.1:*" --endpoint-file "$dir/ep" --servers 1 --workers "$workers" \
    --model lenet5 --steps 100000 --batch 16 --heartbeat-timeout 30 --register-timeout 30 >"$dir/coordinator.out" 2>&1 &
  COORD=$!
  PIDS+=($COORD)
  for _ in $(seq 1 100); do [ -s "$dir/ep" ] && break; sleep 0.05; done
  EP=$(cat "$dir/ep") || fail "the coordinator wrote no endpoint"
  timeout 120 "$PSBED" server --coordinator "$EP" --bind "tcp://127.0.0.1:*" --name server-0 \
    --trace-dir "$dir/traces" >"$dir/server-0.out" 2>&1 &
  SERVER=$!
  PIDS+=($SERVER)
  WORKERS=()
  for i in $(seq 0 $((workers - 1))); do
    timeout 120 "$PSBED" worker --coordinator "$EP" --name "worker-$i" --model lenet5 --data synthetic \
      --straggler-ms 5 --trace-dir "$dir/traces" >"$dir/worker-$i.out" 2>&1 &
    WORKERS+=($!)
    PIDS+=($!)
  done
  for i in $(seq 0 $((workers - 1))); do
    for _ in $(seq 1 200); do grep -q "steps of batch" "$dir/worker-$i.out" && break; sleep 0.05; done
    grep -q "steps of batch" "$dir/worker-$i.out" || { cat "$dir/worker-$i.out"; fail "worker-$i never started training"; }
  done
  sleep 1
}
# wait_rc PID: sets rc to its exit status (bounded by the `timeout` it runs under).
wait_rc() {
  set +e
  wait "$1"
  rc=$?
  set -e
}

# 1. SIGTERM to one of two workers: it stops, the other trains on.
d="$WORK/term"
start_cluster "$d" 2
kill -TERM "${WORKERS[1]}"
wait_rc "${WORKERS[1]}"
[ "$rc" = 130 ] || { cat "$d/worker-1.out"; fail "a worker sent SIGTERM exited $rc, expected 130"; }
grep -q "worker-1 stopped by SIGTERM after [0-9]* steps" "$d/worker-1.out" || { cat "$d/worker-1.out"; fail "no 'stopped by SIGTERM after N steps' line"; }
[ -s "$d/traces/worker-1.trace.json" ] || fail "the stopped worker wrote no trace"
json "$d/traces/worker-1.trace.json" 's["metadata"]["steps_done"]' >/dev/null || fail "the stopped worker's trace has no steps_done"
for _ in $(seq 1 40); do grep -q "worker-1 (worker 1) is dead: stopped by SIGTERM after" "$d/coordinator.out" && break; sleep 0.05; done
grep -q "worker-1 (worker 1) is dead: stopped by SIGTERM after" "$d/coordinator.out" ||
  { cat "$d/coordinator.out"; fail "the coordinator did not hear at once that worker-1 left"; }
kill -0 "${WORKERS[0]}" 2>/dev/null || { cat "$d/worker-0.out"; fail "the other worker stopped too"; }
# 2. SIGTERM to the server: one line, status 130, its trace; the coordinator ends the run.
kill -TERM "$SERVER"
wait_rc "$SERVER"
[ "$rc" = 130 ] || { cat "$d/server-0.out"; fail "a server sent SIGTERM exited $rc, expected 130"; }
grep -q "server-0 stopped by SIGTERM after" "$d/server-0.out" || { cat "$d/server-0.out"; fail "no 'stopped by SIGTERM' line from the server"; }
[ -s "$d/traces/server-0.trace.json" ] || fail "the stopped server wrote no trace"
wait_rc "$COORD"
[ "$rc" = 1 ] || { cat "$d/coordinator.out"; fail "the coordinator exited $rc after its only server left, expected 1"; }
grep -q "server-0 (server 0) is dead: stopped by SIGTERM" "$d/coordinator.out" || { cat "$d/coordinator.out"; fail "the coordinator did not say why the server left"; }
wait_rc "${WORKERS[0]}"
echo "worker: $(grep -h "stopped by SIGTERM" "$d/worker-1.out")"
echo "server: $(grep -h "stopped by SIGTERM" "$d/server-0.out")"

# 3. A second signal ends a node at once. The server is paused, so the worker's step cannot end
#    and the worker waits (up to 1 s) after a SIGINT; a SIGTERM then, past the 0.5 s in which a
#    repeat counts as the same stop (`timeout` and terminals pass one on twice), kills it.
d="$WORK/twice"
start_cluster "$d" 1
node=$(pgrep -P "${WORKERS[0]}" | head -1)
[ -n "$node" ] || fail "no worker process under its timeout"
kill -STOP "$SERVER" "$(pgrep -P "$SERVER" | head -1)"
sleep 0.2
kill -INT "$node"
sleep 0.75
kill -TERM "$node"
wait_rc "${WORKERS[0]}"
kill -CONT "$SERVER" "$(pgrep -P "$SERVER" | head -1)" 2>/dev/null || true
[ "$rc" = 143 ] || { cat "$d/worker-0.out"; fail "a worker sent a second signal exited $rc, expected 143 (killed by SIGTERM)"; }
grep -q "stopped by SIG" "$d/worker-0.out" && { cat "$d/worker-0.out"; fail "the worker finished its stop after a second signal"; }
echo "a second signal: the worker was killed by it (exit $rc)"
echo "PASS"
