#!/usr/bin/env bash
# SIGKILL a shard, then (a second run) the coordinator, under launch. A dead shard ends the run at
# once: the coordinator is told to stop, the workers stop with their traces and report what they
# measured, and the summary names the shard in failed_nodes. A dead coordinator writes no summary:
# launch's summary names it as the failed process, and the other nodes still stop with their
# traces.
source "$(dirname "$0")/lib.sh"
need_data

# kill_during RUN ROLE NAME: a 2-worker run long enough to be killed in; SIGKILL its node NAME
# once the run is going, and wait for launch (which must exit 1).
kill_during() {
  timeout 120 "$PSBED" launch --servers 1 --workers 2 --model lenet5 --data mnist --steps 30000 \
    --batch 32 --lr 0.01 --mode async --out "$WORK/$1" >"$WORK/$1.out" 2>&1 &
  PIDS+=($!)
  local pid="" rc=0
  for _ in $(seq 1 200); do  # 20 s at most for the run to get going (a loaded CI host)
    pid=$(pgrep -f -- "exe $2 .*$WORK/$1/" | head -1 || true)
    [ "$2" != coordinator ] && pid=$(pgrep -f -- "exe $2 .*--name $3 .*$WORK/$1/" | head -1 || true)
    [ -n "$pid" ] && grep -q "step " "$WORK/$1/logs/coordinator.log" 2>/dev/null && break
    pid=""
    sleep 0.1
  done
  [ -n "$pid" ] || { tail -20 "$WORK/$1.out"; fail "the $1 run never got going"; }
  kill -KILL "$pid"
  wait "${PIDS[-1]}" || rc=$?
  tail -8 "$WORK/$1.out"
  [ "$rc" = 1 ] || fail "launch exited $rc after its $3 died, expected 1"
}

# --- a shard dies ---
kill_during shard server server-0
s="$WORK/shard/summary.json"
json "$s" 'sys.exit(0 if s["ok"] is False else 1)' || fail "the summary of a run whose shard died says ok"
json "$s" 's["failure"]' | grep -q "server-0 killed by signal 9" || fail "the failure does not name server-0"
json "$s" '[f["name"] for f in s["failed_nodes"]]' | grep -q "server-0" || fail "failed_nodes lacks server-0"
grep -q "^failed: server-0 (killed by signal 9" "$WORK/shard.out" || fail "launch printed no line for server-0"
[ "$(grep -c "^failed: server-0" "$WORK/shard.out")" = 1 ] || fail "server-0's failure printed more than once"
# The workers were stopped (by the coordinator, or by their SIGTERM), not killed: each reported
# and wrote its trace.
for w in worker-0 worker-1; do
  [ -s "$WORK/shard/traces/$w.trace.json" ] || fail "$w wrote no trace"
  json "$s" "[p['status'] for p in s['launch']['processes'] if p['name'] == '$w'][0]" |
    grep -Eq "exited with status (0|130)" || fail "$w was killed, not stopped"
done
json "$s" 'sys.exit(0 if len(s["per_worker"]) == 2 and all(w["steps"] > 0 for w in s["per_worker"]) else 1)' ||
  fail "the summary lacks what the workers measured"

# --- the coordinator dies ---
kill_during coord coordinator coordinator
s="$WORK/coord/summary.json"
json "$s" '[f["name"] for f in s["launch"]["failed_processes"]]' | grep -q "coordinator" ||
  fail "launch.failed_processes lacks the coordinator"
json "$s" '[f["name"] for f in s["failed_nodes"]]' | grep -q "coordinator" || fail "failed_nodes lacks the coordinator"
grep -q "^failed: coordinator (killed by signal 9" "$WORK/coord.out" || fail "launch printed no line for the coordinator"
for n in server-0 worker-0 worker-1; do
  [ -s "$WORK/coord/traces/$n.trace.json" ] || fail "$n wrote no trace"
done

# --- a hand-started shard dies: the coordinator finds it by its silence, and the worker, told
# to stop, says why the run failed (it said only that the coordinator told it to stop) ---
"$PSBED" coordinator --bind "tcp://127.0.0.1:*" --endpoint-file "$WORK/hand.ep" --servers 1 --workers 1 \
  --model lenet5 --steps 100000 --register-timeout 60 --summary "$WORK/hand.json" >"$WORK/hand-coord.out" 2>&1 &
PIDS+=($!)
for _ in $(seq 1 100); do [ -s "$WORK/hand.ep" ] && break; sleep 0.05; done
ep=$(cat "$WORK/hand.ep") || fail "the hand-started coordinator wrote no endpoint"
"$PSBED" server --coordinator "$ep" --bind "tcp://127.0.0.1:*" --name server-0 >"$WORK/hand-server.out" 2>&1 &
server=$!
PIDS+=($server)
timeout 90 "$PSBED" worker --coordinator "$ep" --name worker-0 --model lenet5 --data mnist >"$WORK/hand-worker.out" 2>&1 &
worker=$!
PIDS+=($worker)
for _ in $(seq 1 200); do grep -q "step " "$WORK/hand-coord.out" && break; sleep 0.1; done
kill -KILL "$server"
rc=0
wait "$worker" || rc=$?
[ "$rc" = 1 ] || { cat "$WORK/hand-worker.out"; fail "the worker exited $rc after the shard died, expected 1"; }
grep -q "the run failed: server server-0 died: its parameters are lost" "$WORK/hand-worker.out" ||
  { tail -3 "$WORK/hand-worker.out"; fail "the worker did not say why the run failed"; }
echo "PASS"
