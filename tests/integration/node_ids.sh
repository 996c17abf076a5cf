#!/usr/bin/env bash
# Node names and ids agree whatever order the nodes register in: worker-1 registering first
# still gets id 1 (its data shard, its line in the summary), and a node without a <role>-K name
# takes the highest id left, so that worker-0 coming after it still gets 0. A node the cluster
# has no room for, one whose name is taken, or one numbered past the cluster's ids is refused at
# once.
source "$(dirname "$0")/lib.sh"
"$PSBED" coordinator --bind "tcp://127.0.0.1:*" --endpoint-file "$WORK/ep" --servers 1 --workers 3 \
  --model lenet5 --steps 20 --batch 16 --register-timeout 60 --summary "$WORK/summary.json" >"$WORK/coordinator.out" 2>&1 &
coord=$!
PIDS+=($coord)
for _ in $(seq 1 100); do [ -s "$WORK/ep" ] && break; sleep 0.05; done
ep=$(cat "$WORK/ep") || fail "the coordinator wrote no endpoint"
start_worker() {  # start_worker NAME: waits until it registered
  timeout 60 "$PSBED" worker --coordinator "$ep" --name "$1" --model lenet5 --data synthetic >"$WORK/$1.out" 2>&1 &
  PIDS+=($!)
  for _ in $(seq 1 200); do grep -q "registered with the coordinator" "$WORK/$1.out" && return; sleep 0.05; done
  cat "$WORK/$1.out"; fail "$1 did not register"
}
# A worker with nothing answering at its --coordinator says so after 2 s, not only when it gives up.
if timeout 30 "$PSBED" worker --coordinator tcp://127.0.0.1:1 --name worker-0 --model lenet5 --data synthetic \
  --connect-timeout 4 >"$WORK/nobody.out" 2>&1; then
  fail "a worker with no coordinator succeeded"
fi
grep -q "no answer yet from the coordinator at tcp://127.0.0.1:1; retrying for up to 4 s" "$WORK/nobody.out" &&
  grep -q "cannot reach the coordinator at tcp://127.0.0.1:1: no answer to registration within 4 s" "$WORK/nobody.out" ||
  { cat "$WORK/nobody.out"; fail "the worker did not say it was waiting for the coordinator"; }
start_worker worker-1
# A second node of a name in use is refused at once, naming it (barriers count nodes by name).
if timeout 30 "$PSBED" worker --coordinator "$ep" --name worker-1 --model lenet5 --data synthetic >"$WORK/dup.out" 2>&1; then
  fail "a second worker-1 was accepted"
fi
grep -q "another node is named 'worker-1' already" "$WORK/dup.out" || { cat "$WORK/dup.out"; fail "no reason given for refusing a second worker-1"; }
# A numbered name past the cluster's ids is refused: it would take a free id and push the real
# worker of that number aside.
if timeout 30 "$PSBED" worker --coordinator "$ep" --name worker-7 --model lenet5 --data synthetic >"$WORK/w7.out" 2>&1; then
  fail "worker-7 joined a cluster of three workers"
fi
grep -q "'worker-7' asks for worker id 7, but the cluster has 3 worker(s), ids 0 to 2" "$WORK/w7.out" ||
  { cat "$WORK/w7.out"; fail "no reason given for refusing worker-7"; }
# So is a worker of another model, or (once one has registered) of another data set: found at
# registration, the slot left to a worker that fits, not after the start with the run a worker short.
if timeout 30 "$PSBED" worker --coordinator "$ep" --name worker-0 --model mlp --data synthetic >"$WORK/mlp.out" 2>&1; then
  fail "a worker of another model joined"
fi
grep -q "its model 'mlp' (535818 parameters) is not the cluster's 'lenet5' (61706): give it --model lenet5" "$WORK/mlp.out" ||
  { cat "$WORK/mlp.out"; fail "no reason given for refusing a worker of another model"; }
if [ -f "$PSBED_DATA_DIR/train-images-idx3-ubyte" ] || [ -f "$PSBED_DATA_DIR/train-images-idx3-ubyte.gz" ]; then
  if timeout 30 "$PSBED" worker --coordinator "$ep" --name worker-0 --model lenet5 --data mnist >"$WORK/mnist.out" 2>&1; then
    fail "a worker of another data set joined"
  fi
  grep -q "is not worker-1's (synthetic 1x28x28.*every worker trains on the same data set" "$WORK/mnist.out" ||
    { cat "$WORK/mnist.out"; fail "no reason given for refusing a worker of another data set"; }
fi
start_worker trainer
start_worker worker-0
grep -q "as worker-1 (id 1)" "$WORK/worker-1.out" || { cat "$WORK/worker-1.out"; fail "worker-1, first to register, did not get id 1"; }
grep -q "as trainer (id 2)" "$WORK/trainer.out" || { cat "$WORK/trainer.out"; fail "an unnumbered worker did not get the highest free id"; }
# One worker too many is refused at once, saying why (it used to retry until --connect-timeout and
# then say it could not reach the coordinator).
start=$SECONDS
if timeout 60 "$PSBED" worker --coordinator "$ep" --name worker-3 --model lenet5 --data synthetic --connect-timeout 30 >"$WORK/extra.out" 2>&1; then
  fail "a fourth worker joined a cluster of three"
fi
grep -q "refused this worker: registration refused: all 3 workers have registered already" "$WORK/extra.out" ||
  { cat "$WORK/extra.out"; fail "no reason given for refusing a fourth worker"; }
[ $((SECONDS - start)) -lt 10 ] || fail "the fourth worker was refused only after $((SECONDS - start)) s"
timeout 60 "$PSBED" server --coordinator "$ep" --bind "tcp://127.0.0.1:*" --name server-0 >"$WORK/server.out" 2>&1 &
PIDS+=($!)
set +e
wait "$coord"
rc=$?
set -e
[ "$rc" = 0 ] || { tail -20 "$WORK/coordinator.out"; fail "the run failed ($rc)"; }
grep -q "worker-0 (worker 0 of 3)" "$WORK/worker-0.out" || { cat "$WORK/worker-0.out"; fail "worker-0 did not train as worker 0"; }
python3 - "$WORK/summary.json" <<'PY' || fail "the summary's names and ids disagree"
import json, sys
s = json.load(open(sys.argv[1]))
got = [(w["name"], w["id"]) for w in s["per_worker"]]
assert got == [("worker-0", 0), ("worker-1", 1), ("trainer", 2)], got
print("per_worker:", got)
PY
# A cluster that never completes: the node that did join hears why when the coordinator gives
# up (it used to say only that the cluster was shut down).
"$PSBED" coordinator --bind "tcp://127.0.0.1:*" --endpoint-file "$WORK/ep2" --servers 1 --workers 2 \
  --model lenet5 --steps 20 --batch 16 --register-timeout 2 --summary "$WORK/summary2.json" >"$WORK/coordinator2.out" 2>&1 &
PIDS+=($!)
ep=$(endpoint_of "$WORK/ep2") || exit 1
if timeout 30 "$PSBED" worker --coordinator "$ep" --name worker-0 --model lenet5 --data synthetic >"$WORK/alone.out" 2>&1; then
  fail "a worker of a cluster that never completed exited 0"
fi
grep -q "shut the cluster down before it started: not every node registered within 2 s: have 0/1 servers and 1/2 workers" \
  "$WORK/alone.out" || { cat "$WORK/alone.out"; fail "the worker was not told why the cluster never started"; }
echo "PASS"
