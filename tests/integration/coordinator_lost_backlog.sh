#!/usr/bin/env bash
# Nodes started on their own notice a coordinator killed with -9 even after their messages to it
# have piled up: heartbeats (and progress reports) fill the link's queue in a few seconds, and a
# heartbeat that waited for room there stopped the clock that notices the silence, so a node
# with the default-like --coordinator-timeout 10 never stopped. Each case: the server and the
# worker exit with status 1 and one line naming the coordinator and the silence, in time, with
# their traces written. The second case runs bsp with few steps, so the worker may finish
# training and wait at the "trained" barrier, which must end too.
source "$(dirname "$0")/lib.sh"
# run_case NAME TIMEOUT_S LIMIT_S MODE STEPS
run_case() {
  local name=$1 timeout_s=$2 limit_s=$3 mode=$4 steps=$5 dir="$WORK/$1"
  mkdir -p "$dir"
  "$PSBED" coordinator --bind "tcp://127.0.0.1:*" --endpoint-file "$dir/ep" --servers 1 --workers 1 \
    --model lenet5 --steps "$steps" --batch 16 --mode "$mode" --register-timeout 30 >"$dir/coordinator.out" 2>&1 &
  local coord=$!
  PIDS+=($coord)
  local ep
  ep=$(endpoint_of "$dir/ep") || exit 1
  timeout 120 "$PSBED" server --coordinator "$ep" --bind "tcp://127.0.0.1:*" --name server-0 \
    --coordinator-timeout "$timeout_s" --trace-dir "$dir/traces" >"$dir/server.out" 2>&1 &
  local server=$!
  PIDS+=($server)
  timeout 120 "$PSBED" worker --coordinator "$ep" --name worker-0 --model lenet5 --data synthetic \
    --straggler-ms 5 --coordinator-timeout "$timeout_s" --trace-dir "$dir/traces" >"$dir/worker.out" 2>&1 &
  local worker=$!
  PIDS+=($worker)
  for _ in $(seq 1 200); do grep -q "steps of batch" "$dir/worker.out" && break; sleep 0.05; done
  grep -q "steps of batch" "$dir/worker.out" || { cat "$dir/worker.out"; fail "$name: the worker never started training"; }
  sleep 1
  kill -KILL "$coord"
  local start rc pid node
  start=$(date +%s)
  for node in server worker; do
    [ "$node" = server ] && pid=$server || pid=$worker
    set +e
    wait "$pid"
    rc=$?
    set -e
    [ "$rc" = 1 ] || { cat "$dir/$node.out"; fail "$name: the $node exited $rc after the coordinator died, expected 1 (124: still running after 120 s)"; }
    grep -q "lost the coordinator at $ep: nothing heard from it for [0-9.]* s (--coordinator-timeout $timeout_s s)" "$dir/$node.out" ||
      { cat "$dir/$node.out"; fail "$name: the $node did not say it lost the coordinator"; }
    [ "$(grep -c "lost the coordinator" "$dir/$node.out")" = 1 ] ||
      { cat "$dir/$node.out"; fail "$name: the $node said it lost the coordinator more than once"; }
  done
  local took=$(( $(date +%s) - start ))
  [ "$took" -le "$limit_s" ] || fail "$name: the nodes took $took s to stop (--coordinator-timeout $timeout_s s, limit $limit_s s)"
  for t in worker-0 server-0; do
    [ -s "$dir/traces/$t.trace.json" ] || { ls -la "$dir/traces" "$dir"; cat "$dir/worker.out" "$dir/server.out"; fail "$name: no trace of $t"; }
  done
  echo "$name: both nodes stopped $took s after the coordinator died: $(grep -h "lost the coordinator" "$dir/worker.out")"
}
run_case short 4 15 async 100000
# ~3 messages a second (heartbeats, progress or stats) against a queue of about 20: full in ~7 s.
run_case backlog 10 25 bsp 800
echo "PASS"
