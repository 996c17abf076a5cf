#!/usr/bin/env bash
# Peers that ask and never read what they asked for hold nobody else up. A raw ZeroMQ client
# sends each shard 300 valid pulls of lenet5's fc1 weights (192 KB each) and the coordinator
# 50,000 `ctl status` requests, and reads none of the answers, for the whole run. The workers'
# pace stays within 10% of an unattacked run's (best of three alternated runs each), the run ends on
# time, and the shards count the replies they dropped.
source "$(dirname "$0")/lib.sh"
# Debian's python3-zmq imports only from Debian's own python3 (another may come first on PATH).
PY3=/usr/bin/python3
"$PY3" -c 'import zmq' 2>/dev/null || skip "python3-zmq is not installed (cluster/install-deps.sh test)"
need_data

# run NAME [attack]: one launch; with `attack`, the raw client runs beside it once the workers
# train. Prints the run's images/s; its wall time goes to NAME.wall.
run() {
  local name="$1" attack="${2:-}"
  local t0=$SECONDS
  "$PSBED" launch --servers 2 --workers 2 --model lenet5 --data mnist --steps 400 --batch 32 --mode async \
    --threads 1 --timeout 300 --out "$WORK/$name" >"$WORK/$name.out" 2>&1 &
  local pid=$!
  PIDS+=("$pid")
  local rogue=""
  if [ -n "$attack" ]; then
    # The shards' and coordinator's endpoints, once the workers train.
    for _ in $(seq 1 300); do
      grep -q "steps of batch" "$WORK/$name/logs/worker-1.log" 2>/dev/null && break
      sleep 0.1
    done
    local shards coordinator
    shards=$(grep -ho 'serving on tcp://[0-9.:]*' "$WORK/$name"/logs/server-*.log | cut -d' ' -f3 | tr '\n' ' ')
    coordinator=$(cat "$WORK/$name/logs/coordinator.endpoint" 2>/dev/null || true)
    [ -n "$coordinator" ] || coordinator=$(grep -ho 'coordinator on tcp://[0-9.:]*' "$WORK/$name/logs/coordinator.log" | cut -d' ' -f3)
    [ -n "$shards" ] && [ -n "$coordinator" ] || fail "$name: no shard or coordinator endpoint in the logs"
    timeout 120 "$PY3" - "$coordinator" $shards >"$WORK/$name.rogue" 2>&1 <<'PY' &
import json, struct, sys, time, zmq

def header(op, key=0, part=0, length=0, seq=0):
    # magic 'PSBD', version 1, op, flags, sender, key, part, priority, offset, length, clock, seq, 0
    return struct.pack("<IHBBIIIiQQQQQ", 0x50534244, 1, op, 0, 0, key, part, 0, 0, length, 0, seq, 0)

ctx = zmq.Context()
socks = []
def dealer(endpoint, identity):
    s = ctx.socket(zmq.DEALER)
    s.setsockopt(zmq.IDENTITY, identity)
    s.setsockopt(zmq.RCVHWM, 1)        # reads nothing: what is sent to it backs up
    s.setsockopt(zmq.RCVBUF, 4096)
    s.setsockopt(zmq.SNDHWM, 100000)
    s.connect(endpoint)
    socks.append(s)
    return s

coordinator, shards = sys.argv[1], sys.argv[2:]
# lenet5's fc1.weight is key 4 (conv1 w/b, conv2 w/b, then fc1): 400 x 120 floats, one part,
# on one of the shards (the other counts the pulls as for a part it does not hold).
for i, ep in enumerate(shards):
    s = dealer(ep, b"rogue-pull-%d" % i)
    for seq in range(300):
        s.send_multipart([header(5, key=4, part=0, length=192000, seq=seq + 1)])
c = dealer(coordinator, b"rogue-ctl")
status = json.dumps({"event": "ctl", "command": "status"}).encode()
# One message built once: on a 2-core host the client's own CPU is taken from the run too.
request = [header(11, length=len(status), seq=1), status]
for _ in range(50000):
    c.send_multipart(request)
print("sent", flush=True)
time.sleep(1000)  # connected, reading nothing, until the test ends it
PY
    rogue=$!
    PIDS+=("$rogue")
  fi
  wait "$pid" || { tail -20 "$WORK/$name.out"; fail "$name: the run failed"; }
  echo $((SECONDS - t0)) >"$WORK/$name.wall"
  if [ -n "$rogue" ]; then
    grep -q sent "$WORK/$name.rogue" || { cat "$WORK/$name.rogue"; fail "$name: the raw client did not send"; }
    kill "$rogue" 2>/dev/null || true
  fi
  json "$WORK/$name/summary.json" "s['images_per_sec']"
}

base=() attacked=()
for i in 1 2 3; do
  base+=("$(run "base$i")")
  attacked+=("$(run "attacked$i" attack)")
done
echo "images/s unattacked: ${base[*]}; attacked: ${attacked[*]}"
echo "wall s unattacked: $(cat "$WORK"/base*.wall | tr '\n' ' ') attacked: $(cat "$WORK"/attacked*.wall | tr '\n' ' ')"
python3 - "${base[@]}" "${attacked[@]}" <<'PY' || fail "the attacked runs were more than 10% slower"
import sys
v = [float(x) for x in sys.argv[1:]]
n = len(v) // 2
base, attacked = sorted(v[:n]), sorted(v[n:])
ratio = max(attacked) / max(base)
print(f"attacked / unattacked (best of {n} each): {ratio:.3f}")
assert ratio >= 0.9, ratio
PY
for i in 1 2 3; do
  # The run ended on time: an attacked run took at most 10 s more than the slower unattacked one.
  [ "$(cat "$WORK/attacked$i.wall")" -le $(($(cat "$WORK"/base*.wall | sort -n | tail -1) + 10)) ] ||
    fail "attacked$i took $(cat "$WORK/attacked$i.wall") s: the shutdown was held up"
done
# The replies the raw client never read were dropped and counted, not queued without end.
grep -h "dropping messages to rogue" "$WORK"/attacked1/logs/*.log | head -3 || true
echo "PASS"
