#!/usr/bin/env bash
# A node that is stuck still stops on SIGTERM within 2 s: a worker whose shard froze (SIGSTOP)
# while it waited for answers, or for room to send (one-message queues and a large model); a
# shard whose worker froze with replies backed up towards it; and a coordinator whose workers
# froze ends the run within its 5 s wait for their reports.
source "$(dirname "$0")/lib.sh"
# start DIR MODEL: a coordinator, server-0 and worker-0, hand-started, training.
start() {
  local dir=$1 model=$2
  mkdir -p "$dir"
  "$PSBED" coordinator --bind "tcp://127.0.0.1:*" --endpoint-file "$dir/ep" --servers 1 --workers 1 \
    --model "$model" --steps 100000 --batch 8 --heartbeat-timeout 60 --register-timeout 30 \
    >"$dir/coordinator.out" 2>&1 &
  COORD=$!
  PIDS+=($COORD)
  EP=$(endpoint_of "$dir/ep") || exit 1
  "$PSBED" server --coordinator "$EP" --bind "tcp://127.0.0.1:*" --name server-0 \
    --coordinator-timeout 60 >"$dir/server-0.out" 2>&1 &
  SERVER=$!
  PIDS+=($SERVER)
  "$PSBED" worker --coordinator "$EP" --name worker-0 --model "$model" --data synthetic \
    --threads 1 --coordinator-timeout 60 >"$dir/worker-0.out" 2>&1 &
  WORKER=$!
  PIDS+=($WORKER)
  for _ in $(seq 1 300); do grep -q "steps of batch" "$dir/worker-0.out" && break; sleep 0.05; done
  grep -q "steps of batch" "$dir/worker-0.out" || { cat "$dir/worker-0.out"; fail "worker-0 never trained"; }
  sleep 1
}
# stops_within PID SECONDS WHAT: SIGTERM, then the process must be gone within SECONDS.
stops_within() {
  local pid=$1 limit=$2 what=$3 t0 t1
  t0=$(date +%s%N)
  kill -TERM "$pid"
  for _ in $(seq 1 $((limit * 20 + 40))); do kill -0 "$pid" 2>/dev/null || break; sleep 0.05; done
  t1=$(date +%s%N)
  local ms=$(((t1 - t0) / 1000000))
  kill -0 "$pid" 2>/dev/null && fail "$what: still running $ms ms after SIGTERM"
  echo "$what: ended $ms ms after SIGTERM"
  [ "$ms" -le $((limit * 1000)) ] || fail "$what took $ms ms to end, expected at most ${limit} s"
}

# case NAME MODEL FROZEN STOPPED SECONDS LIMIT WHAT: starts a cluster, freezes the node FROZEN
# (SERVER, WORKER) with SIGSTOP, waits SECONDS, then SIGTERM to STOPPED must end it within
# LIMIT seconds. The frozen node is thawed and every node stopped after.
case_() {
  local name=$1 model=$2 frozen=$3 stopped=$4 wait_s=$5 limit=$6 what=$7
  start "$WORK/$name" "$model"
  kill -STOP "${!frozen}"
  sleep "$wait_s"
  stops_within "${!stopped}" "$limit" "$what"
  kill -CONT "${!frozen}"
  kill -TERM "$SERVER" "$WORKER" "$COORD" 2>/dev/null || true
}
FC="$SRC/tests/fixtures/models/stress-fc.toml"
# A worker waiting on a frozen shard's answers.
case_ answers lenet5 SERVER WORKER 1.5 2 "a worker waiting on a frozen shard"
# A worker waiting for room to send to a frozen shard: one-message queues, 11 MiB of tensors.
PSBED_QUEUE_DEPTH=1 case_ room "$FC" SERVER WORKER 1.5 2 "a worker waiting for room to send"
# A shard whose only worker froze with replies on their way to it.
PSBED_QUEUE_DEPTH=1 case_ shard "$FC" WORKER SERVER 1.5 2 "a shard whose worker froze"
# A coordinator whose worker froze: it waits at most 5 s for the report that cannot come.
case_ coordinator lenet5 WORKER COORD 0.5 6 "a coordinator whose worker froze"
echo "PASS"
