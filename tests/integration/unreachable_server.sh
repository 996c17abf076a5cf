#!/usr/bin/env bash
# A shard that advertises an address nobody listens on: its worker gives up after its
# --connect-timeout with one line naming the shard, the address and what it waited for (exit
# status 1), and the coordinator hears why at once. A server bound to every interface with no
# --advertise would give workers tcp://0.0.0.0:PORT: it refuses to start, saying to give one.
# Timeouts are printed as given (0.5 s, not 0 s).
source "$(dirname "$0")/lib.sh"
free_port() { python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])'; }

# 1. An advertised address that leads nowhere.
nowhere="tcp://127.0.0.1:$(free_port)"
"$PSBED" coordinator --bind "tcp://127.0.0.1:*" --endpoint-file "$WORK/ep" --servers 1 --workers 1 \
  --model lenet5 --steps 100000 --batch 16 --register-timeout 30 >"$WORK/coordinator.out" 2>&1 &
coord=$!
PIDS+=($coord)
ep=$(endpoint_of "$WORK/ep") || exit 1
timeout 60 "$PSBED" server --coordinator "$ep" --bind "tcp://127.0.0.1:*" --advertise "$nowhere" --name server-0 \
  >"$WORK/server.out" 2>&1 &
PIDS+=($!)
start=$(date +%s)
set +e
timeout 60 "$PSBED" worker --coordinator "$ep" --name worker-0 --model lenet5 --data synthetic \
  --connect-timeout 2.5 >"$WORK/worker.out" 2>&1
rc=$?
set -e
took=$(( $(date +%s) - start ))
[ "$rc" = 1 ] || { cat "$WORK/worker.out"; fail "a worker whose shard cannot be reached exited $rc, expected 1 (124: it hung)"; }
grep -q "cannot reach server-0 at $nowhere .*no answer to a pull within 2.5 s (--connect-timeout)" "$WORK/worker.out" ||
  { cat "$WORK/worker.out"; fail "the worker did not say which shard it could not reach and what it waited for"; }
[ "$took" -le 20 ] || fail "the worker took $took s to give up (--connect-timeout 2.5)"
for _ in $(seq 1 40); do grep -q "worker-0 (worker 0) is dead: cannot reach server-0" "$WORK/coordinator.out" && break; sleep 0.05; done
grep -q "worker-0 (worker 0) is dead: cannot reach server-0" "$WORK/coordinator.out" ||
  { cat "$WORK/coordinator.out"; fail "the coordinator did not hear why the worker left"; }
echo "worker: $(grep -h "cannot reach" "$WORK/worker.out")"
kill -TERM "$coord" 2>/dev/null || true

# 2. A wildcard bind with no --advertise, and a wildcard --advertise: refused before joining.
port=$(free_port)
for args in "--bind tcp://0.0.0.0:$port" "--bind tcp://*:$port" "--bind tcp://0.0.0.0:$port --advertise tcp://0.0.0.0:$port"; do
  set +e
  # shellcheck disable=SC2086
  out=$(timeout 20 "$PSBED" server --coordinator tcp://127.0.0.1:9 --connect-timeout 1 $args 2>&1)
  rc=$?
  set -e
  [ "$rc" = 1 ] || fail "server $args: exited $rc, expected 1: $out"
  grep -q "advertise" <<<"$out" || fail "server $args: expected a line saying to give --advertise: $out"
  grep -q "cannot reach the coordinator" <<<"$out" && fail "server $args: tried to register first: $out"
  echo "server $args: $(tail -1 <<<"$out")"
done

# 3. Timeouts under a second are printed as given.
set +e
out=$(timeout 20 "$PSBED" worker --coordinator "tcp://127.0.0.1:$(free_port)" --model lenet5 --data synthetic \
  --connect-timeout 0.5 2>&1)
set -e
grep -q "within 0.5 s (--connect-timeout)" <<<"$out" || fail "expected 'within 0.5 s': $out"
echo "PASS"
