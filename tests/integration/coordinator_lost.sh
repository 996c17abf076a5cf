#!/usr/bin/env bash
# Nodes started on their own (as compose and Kubernetes start them) notice a coordinator that
# died: it answers every heartbeat, and after --coordinator-timeout of silence a shard and a
# worker stop with a one-line error naming it (exit status 1), their traces written, instead of
# running on forever.
source "$(dirname "$0")/lib.sh"
"$PSBED" coordinator --bind "tcp://127.0.0.1:*" --endpoint-file "$WORK/ep" --servers 1 --workers 1 \
  --model lenet5 --steps 100000 --batch 16 --register-timeout 30 >"$WORK/coordinator.out" 2>&1 &
coord=$!
PIDS+=($coord)
ep=$(endpoint_of "$WORK/ep") || exit 1
timeout 60 "$PSBED" server --coordinator "$ep" --bind "tcp://127.0.0.1:*" --name server-0 --coordinator-timeout 2 \
  --trace-dir "$WORK/traces" >"$WORK/server.out" 2>&1 &
server=$!
PIDS+=($server)
timeout 60 "$PSBED" worker --coordinator "$ep" --name worker-0 --model lenet5 --data synthetic \
  --coordinator-timeout 2 --trace-dir "$WORK/traces" >"$WORK/worker.out" 2>&1 &
worker=$!
PIDS+=($worker)
for _ in $(seq 1 200); do grep -q "steps of batch" "$WORK/worker.out" && break; sleep 0.05; done
grep -q "steps of batch" "$WORK/worker.out" || { cat "$WORK/worker.out"; fail "the worker never started training"; }
sleep 0.5
kill -KILL "$coord"
start=$(date +%s)
for name in server worker; do
  pid=${!name}
  set +e
  wait "$pid"
  rc=$?
  set -e
  [ "$rc" = 1 ] || { cat "$WORK/$name.out"; fail "the $name exited $rc after the coordinator died, expected 1"; }
  grep -q "lost the coordinator at $ep" "$WORK/$name.out" || { cat "$WORK/$name.out"; fail "the $name did not say it lost the coordinator"; }
done
took=$(( $(date +%s) - start ))
[ "$took" -le 15 ] || fail "the nodes took $took s to stop (timeout 2 s)"
for t in worker-0 server-0; do [ -s "$WORK/traces/$t.trace.json" ] || { ls -la "$WORK/traces" "$WORK"; cat "$WORK/worker.out" "$WORK/server.out"; fail "no trace of $t"; }; done
echo "both nodes stopped $took s after the coordinator died: $(grep -h "lost the coordinator" "$WORK/worker.out" | tail -1)"
echo "PASS"
