#!/usr/bin/env bash
# Nobody but a registered worker trains the model. A raw ZeroMQ client that can reach every port
# (no key: the cluster runs without --secure) sends each shard pushes of NaN gradients and pushes
# 30 and 1000 clocks ahead in worker 0's name, and pulls in its name; the coordinator a 50 MB
# message, a 100 KB registration, a worker registration after the cluster is full and a ctl policy
# switch without the token. Each is refused and counted, and the bsp run's final parameters are
# bit for bit those of the same run unattacked.
source "$(dirname "$0")/lib.sh"
PY3=/usr/bin/python3
"$PY3" -c 'import zmq' 2>/dev/null || skip "python3-zmq is not installed (cluster/install-deps.sh test)"
need_data

# run NAME [attack]: one bsp launch with one worker and two shards, its parameters in NAME.bin.
# The worker sleeps 20 ms a step (it changes no figure), so that a run lasts 6 s or more however
# fast the host: the attack must meet it training.
run() {
  local name="$1" attack="${2:-}"
  "$PSBED" launch --servers 2 --workers 1 --model lenet5 --data mnist --steps 300 --batch 64 --lr 0.03 \
    --mode bsp --threads 1 --straggler-ms 20 --timeout 240 --http 127.0.0.1:0 --http-token s3cret-token \
    --save-params "$WORK/$name.bin" --out "$WORK/$name" >"$WORK/$name.out" 2>&1 &
  local pid=$!
  PIDS+=("$pid")
  if [ -n "$attack" ]; then
    for _ in $(seq 1 300); do
      grep -q "steps of batch" "$WORK/$name/logs/worker-0.log" 2>/dev/null && break
      sleep 0.1
    done
    local shards coordinator
    shards=$(grep -ho 'serving on tcp://[0-9.:]*' "$WORK/$name"/logs/server-*.log | cut -d' ' -f3 | tr '\n' ' ')
    coordinator=$(cat "$WORK/$name/logs/coordinator.endpoint")
    [ -n "$shards" ] && [ -n "$coordinator" ] || fail "$name: no shard or coordinator endpoint in the logs"
    # The switch without the token is refused, by ctl's exit status and its line.
    if "$PSBED" ctl --run "$WORK/$name" policy bulk >"$WORK/$name.ctl" 2>&1; then
      cat "$WORK/$name.ctl"; fail "ctl switched the policy without the token"
    fi
    grep -q "token is required" "$WORK/$name.ctl" || { cat "$WORK/$name.ctl"; fail "ctl did not say why"; }
    # With it, the coordinator answers.
    "$PSBED" ctl --run "$WORK/$name" --token s3cret-token status >"$WORK/$name.status" 2>&1 ||
      { cat "$WORK/$name.status"; fail "ctl status with the token failed"; }
    local coord_pid
    coord_pid=$(pgrep -f -- "coordinator.*$WORK/$name/" | head -1)
    [ -n "$coord_pid" ] || fail "$name: no coordinator process"
    timeout 60 "$PY3" - "$coordinator" $shards >"$WORK/$name.rogue" 2>&1 <<'PY' || { cat "$WORK/$name.rogue"; fail "the raw client failed"; }
import json, struct, sys, time, zmq

def header(op, sender=0, key=0, part=0, length=0, clock=0, seq=0):
    # magic 'PSBD', version 1, op, flags, sender, key, part, priority, offset, length, clock, seq, 0
    return struct.pack("<IHBBIIIiQQQQQ", 0x50534244, 1, op, 0, sender, key, part, 0, 0, length,
                       clock, seq, 0)

ctx = zmq.Context()
def dealer(endpoint, identity):
    s = ctx.socket(zmq.DEALER)
    s.setsockopt(zmq.IDENTITY, identity)
    s.setsockopt(zmq.LINGER, 2000)
    s.connect(endpoint)
    return s

coordinator, shards = sys.argv[1], sys.argv[2:]
# lenet5's tensors in key order (conv1 w/b, conv2 w/b, fc1..fc3 w/b): one part each.
sizes = [150, 6, 2400, 16, 48000, 120, 10080, 84, 840, 10]
nan = struct.pack("<f", float("nan"))
seq = 0
for i, ep in enumerate(shards):
    s = dealer(ep, b"rogue-%d" % i)
    for key, n in enumerate(sizes):
        for clock in (0, 1, 2, 30, 1000):
            seq += 1
            s.send_multipart([header(3, key=key, length=4 * n, clock=clock, seq=seq), nan * n])
        seq += 1
        s.send_multipart([header(5, key=key, length=4 * n, seq=seq)])
    # Nothing comes back: a refused message gets no answer.
    if s.poll(300):
        print("a shard answered a forged message:", s.recv_multipart()[0][:8])
        sys.exit(1)
# Past the size bound: ZeroMQ drops the connection before the coordinator reads a byte.
dealer(coordinator, b"rogue-huge").send_multipart([header(1, length=50 << 20), b"x" * (50 << 20)])
big = json.dumps({"role": "worker", "name": "worker-9", "pad": "x" * 100000}).encode()
dealer(coordinator, b"rogue-big").send_multipart([header(1, length=len(big)), big])
c = dealer(coordinator, b"rogue-register")
reg = json.dumps({"role": "worker", "name": "rogue", "link_id": "r" * 32}).encode()
c.send_multipart([header(1, length=len(reg)), reg])
if not c.poll(5000):
    print("no answer to a registration after the cluster is full")
    sys.exit(1)
frames = c.recv_multipart()
print("registration:", frames[-1].decode())
assert "refused" in frames[-1].decode(), frames
print("sent", seq, "forged messages to the shards")
PY
    # The 50 MB message never entered the coordinator's memory (it took 1.1 GB when it was parsed).
    local peak
    peak=$(awk '/VmHWM/ {print $2}' "/proc/$coord_pid/status")
    echo "the coordinator's peak memory after the attack: $((peak / 1024)) MiB"
    [ "$peak" -lt $((200 * 1024)) ] || fail "the coordinator grew to $((peak / 1024)) MiB"
  fi
  wait "$pid" || { tail -20 "$WORK/$name.out"; fail "$name: the run failed"; }
}

run plain
run attacked attack
cat "$WORK/attacked.rogue"
# Every forged message was refused and counted by kind at each shard (each took 50 pushes and
# 10 pulls in worker 0's name).
for s in 0 1; do
  n=$(grep -ho "bad messages, forged sender: [0-9]*" "$WORK/attacked/logs/server-$s.log" | grep -o "[0-9]*$" || true)
  echo "server-$s refused ${n:-0} forged messages"
  [ "${n:-0}" = 60 ] || { tail -5 "$WORK/attacked/logs/server-$s.log"; fail "server-$s counted ${n:-0} forged messages, expected 60"; }
done
# The summary keeps the counts the shards reported while the run went on.
json "$WORK/attacked/summary.json" "sum(v.get('forged sender', 0) for v in s['bad_messages_by_server'].values())" |
  grep -qx "120" || fail "the summary does not count the 120 forged messages: $(json "$WORK/attacked/summary.json" "s['bad_messages_by_server']")"
grep -q "registration of 'rogue' refused" "$WORK/attacked/logs/coordinator.log" || fail "the late registration was not logged"
grep -q "a registration of [0-9]* bytes, expected at most" "$WORK/attacked/logs/coordinator.log" ||
  fail "the oversized registration was not refused by its size"
grep -q "a ctl request without the coordinator's token" "$WORK/attacked/logs/coordinator.log" || fail "the ctl refusal was not logged"
[ "$(json "$WORK/attacked/summary.json" "len(s['policy_switches'])")" = 0 ] || fail "a policy switch took effect"
"$PY3" - "$WORK/plain.bin" "$WORK/attacked.bin" <<'PY' || fail "the attacked run's parameters differ from the unattacked run's"
import array, sys
a = array.array('f', open(sys.argv[1], 'rb').read())
b = array.array('f', open(sys.argv[2], 'rb').read())
assert len(a) == len(b) == 61706, (len(a), len(b))
same = a.tobytes() == b.tobytes()
print(f"final parameters: {'identical' if same else 'different'} over {len(a)} floats")
sys.exit(0 if same else 1)
PY
echo "PASS"
