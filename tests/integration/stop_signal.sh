#!/usr/bin/env bash
# SIGTERM (docker compose stop, kubectl delete) or SIGINT stops a hand-started node cleanly: a
# worker ends at the next step boundary, tells the coordinator it is leaving (it logs the worker
# dead at once, with the reason, instead of waiting for its heartbeats to stop), writes its
# trace, logs one line and exits 130; a server likewise. A second signal ends a node at once. A
# step still making progress (a slow link) is finished, not cut short; a signal ignored when the
# node started stays ignored; a worker stopped after it registered tells the coordinator.
source "$(dirname "$0")/lib.sh"
COORD_ARGS=()   # extra coordinator flags for the next start_cluster
WORKER_ARGS=()  # extra worker flags for the next start_cluster
# start_cluster DIR WORKERS: a coordinator, server-0 and worker-0 .. worker-(WORKERS-1).
start_cluster() {
  local dir=$1 workers=$2 i
  mkdir -p "$dir"
  "$PSBED" coordinator --bind "tcp://127.0.0.1:*" --endpoint-file "$dir/ep" --servers 1 --workers "$workers" \
    --model lenet5 --steps 100000 --batch 16 --heartbeat-timeout 30 --register-timeout 30 "${COORD_ARGS[@]}" \
    >"$dir/coordinator.out" 2>&1 &
  COORD=$!
  PIDS+=($COORD)
  EP=$(endpoint_of "$dir/ep") || exit 1
  timeout 120 "$PSBED" server --coordinator "$EP" --bind "tcp://127.0.0.1:*" --name server-0 \
    --trace-dir "$dir/traces" >"$dir/server-0.out" 2>&1 &
  SERVER=$!
  PIDS+=($SERVER)
  WORKERS=()
  for i in $(seq 0 $((workers - 1))); do
    timeout 120 "$PSBED" worker --coordinator "$EP" --name "worker-$i" --model lenet5 --data synthetic \
      --straggler-ms 5 --trace-dir "$dir/traces" "${WORKER_ARGS[@]}" >"$dir/worker-$i.out" 2>&1 &
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

# 3. A second signal ends a node at once. The server and the coordinator are paused: the
#    worker's step cannot end, so after a SIGINT the worker waits 1 s with nothing arriving,
#    gives up the step, then waits 0.5 s for the coordinator to hear it leave: at least 1.5 s.
#    A SIGTERM every 0.1 s from 0.6 s on (past the 0.5 s in which a repeat counts as the same
#    stop: `timeout` and terminals pass one on twice) kills it, however loaded the machine.
d="$WORK/twice"
start_cluster "$d" 1
node=$(pgrep -P "${WORKERS[0]}" | head -1)
server_node=$(pgrep -P "$SERVER" | head -1)
[ -n "$node" ] || fail "no worker process under its timeout"
kill -STOP "$SERVER" "$server_node" "$COORD"
sleep 0.2
kill -INT "$node"
sleep 0.6
for _ in $(seq 1 100); do  # 10 s at most
  kill -TERM "$node" 2>/dev/null || break
  sleep 0.1
done
wait_rc "${WORKERS[0]}"
kill -CONT "$SERVER" "$server_node" "$COORD" 2>/dev/null || true
[ "$rc" = 143 ] || { cat "$d/worker-0.out"; fail "a worker sent a second signal exited $rc, expected 143 (killed by SIGTERM)"; }
grep -q "stopped by SIG" "$d/worker-0.out" && { cat "$d/worker-0.out"; fail "the worker finished its stop after a second signal"; }
echo "a second signal: the worker was killed by it (exit $rc)"
signal_all KILL
for _ in $(seq 1 50); do alive || break; sleep 0.1; done
PIDS=()

# 4. A step stuck on a shard that stopped answering is given up 1 s after the last arrival: the
#    worker stops with its trace, in one line that says the step was cut short.
d="$WORK/stuck"
start_cluster "$d" 1
server_node=$(pgrep -P "$SERVER" | head -1)
kill -STOP "$SERVER" "$server_node"
sleep 0.2
start=$(date +%s%N)
kill -TERM "${WORKERS[0]}"
wait_rc "${WORKERS[0]}"
took_ms=$((($(date +%s%N) - start) / 1000000))
kill -CONT "$SERVER" "$server_node" 2>/dev/null || true
[ "$rc" = 130 ] || { cat "$d/worker-0.out"; fail "a worker stuck on a paused server exited $rc after SIGTERM, expected 130"; }
[ "$(grep -c "stopped by SIGTERM" "$d/worker-0.out")" = 1 ] || { cat "$d/worker-0.out"; fail "not one 'stopped by SIGTERM' line"; }
grep -q "stopped by SIGTERM after [0-9]* steps (of 100000); the step in flight cut short" "$d/worker-0.out" ||
  { cat "$d/worker-0.out"; fail "the stuck worker did not say its step was cut short"; }
[ -s "$d/traces/worker-0.trace.json" ] || fail "the stuck worker wrote no trace"
[ "$took_ms" -lt 10000 ] || fail "the stuck worker took $took_ms ms to stop"
echo "stuck: $(grep -h "stopped by SIGTERM" "$d/worker-0.out") ($took_ms ms)"
signal_all KILL
for _ in $(seq 1 50); do alive || break; sleep 0.1; done
PIDS=()

# 5. A slow link: a step takes seconds (parts of 16 KiB at 1 Mbit/s, one every ~0.15 s) and
#    nothing is stuck, so a stop finishes the step in flight however long it takes.
d="$WORK/slow"
COORD_ARGS=(--partition-bytes 16KiB)
WORKER_ARGS=(--bandwidth 1mbit)
start_cluster "$d" 1
COORD_ARGS=()
WORKER_ARGS=()
kill -TERM "${WORKERS[0]}"
wait_rc "${WORKERS[0]}"
[ "$rc" = 130 ] || { cat "$d/worker-0.out"; fail "a worker on a slow link exited $rc after SIGTERM, expected 130"; }
grep -q "worker-0 stopped by SIGTERM after [1-9][0-9]* steps" "$d/worker-0.out" ||
  { cat "$d/worker-0.out"; fail "the worker on a slow link did not finish its step"; }
grep -q "cut short" "$d/worker-0.out" && { cat "$d/worker-0.out"; fail "a step still making progress was cut short"; }
echo "slow link: $(grep -h "stopped by SIGTERM" "$d/worker-0.out")"
signal_all KILL
for _ in $(seq 1 50); do alive || break; sleep 0.1; done
PIDS=()

# 6. A signal ignored when the node started stays ignored (a background job of a script ignores
#    SIGINT: a Ctrl-C at the terminal must not stop it); one not ignored still stops it. The
#    server waits to register with a coordinator that is not there.
d="$WORK/ignored"
mkdir -p "$d"
# (Not under `timeout`: it handles SIGINT itself, so its command starts with SIGINT not ignored.
# The wait is bounded by --connect-timeout.)
(trap '' INT; exec "$PSBED" server --coordinator tcp://127.0.0.1:9 --bind "tcp://127.0.0.1:*" --name server-x \
  --connect-timeout 60 >"$d/server.out" 2>&1) &
ign=$!
PIDS+=($ign)
for _ in $(seq 1 100); do grep -q "serving on" "$d/server.out" && break; sleep 0.05; done
grep -q "serving on" "$d/server.out" || { cat "$d/server.out"; fail "the server never started"; }
kill -INT "$ign"
sleep 1
kill -0 "$ign" 2>/dev/null || { cat "$d/server.out"; fail "a server started with SIGINT ignored stopped on SIGINT"; }
grep -q "stopped by" "$d/server.out" && { cat "$d/server.out"; fail "a server started with SIGINT ignored took SIGINT"; }
kill -TERM "$ign"
wait_rc "$ign"
[ "$rc" = 130 ] || { cat "$d/server.out"; fail "the server exited $rc after SIGTERM, expected 130"; }
grep -q "server-x stopped by SIGTERM before it registered with the coordinator" "$d/server.out" ||
  { cat "$d/server.out"; fail "no 'stopped by SIGTERM before it registered' line"; }
echo "ignored SIGINT: $(grep -h "stopped by" "$d/server.out")"
PIDS=()

# 7. A worker stopped after it registered, before the cluster started (the coordinator waits for
#    a server that never comes), tells the coordinator, which hears it at once.
d="$WORK/registered"
mkdir -p "$d"
"$PSBED" coordinator --bind "tcp://127.0.0.1:*" --endpoint-file "$d/ep" --servers 1 --workers 1 \
  --model lenet5 --steps 10 --batch 16 --heartbeat-timeout 30 --register-timeout 60 >"$d/coordinator.out" 2>&1 &
COORD=$!
PIDS+=($COORD)
EP=$(endpoint_of "$d/ep") || exit 1
timeout 120 "$PSBED" worker --coordinator "$EP" --name worker-r --model lenet5 --data synthetic >"$d/worker.out" 2>&1 &
w=$!
PIDS+=($w)
for _ in $(seq 1 200); do grep -q "registered with the coordinator" "$d/worker.out" && break; sleep 0.05; done
grep -q "registered with the coordinator" "$d/worker.out" || { cat "$d/worker.out"; fail "the worker never registered"; }
kill -TERM "$w"
wait_rc "$w"
[ "$rc" = 130 ] || { cat "$d/worker.out"; fail "a registered worker exited $rc after SIGTERM, expected 130"; }
grep -q "worker-r stopped by SIGTERM after it registered, before the cluster started; the coordinator was told" \
  "$d/worker.out" || { cat "$d/worker.out"; fail "no 'after it registered' line"; }
for _ in $(seq 1 40); do grep -q "worker-r (worker 0) is dead: stopped by SIGTERM" "$d/coordinator.out" && break; sleep 0.05; done
grep -q "worker-r (worker 0) is dead: stopped by SIGTERM" "$d/coordinator.out" ||
  { cat "$d/coordinator.out"; fail "the coordinator did not hear at once that the registered worker left"; }
echo "registered: $(grep -h "stopped by" "$d/worker.out")"
echo "PASS"
