#!/usr/bin/env bash
# A peer that asks and never reads what it asked for holds nobody up. A raw ZeroMQ client sends
# the coordinator 50,000 `ctl status` requests and reads none of the answers, for the whole run.
# The coordinator answers at most its ctl rate and drops the rest, and keeps what it sent to that
# peer within a bound (the transport contract tests check the bound); the run trains
# without a stall and ends on time. (Its pace beside an unattacked run's is printed, not judged:
# on a shared 2-core host two runs differ by more than the effect; docs/failures.md has the
# figures. Shards take requests only from their workers' own connections: forged_updates.sh.)
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
    # The coordinator's endpoint, once the workers train.
    for _ in $(seq 1 300); do
      grep -q "steps of batch" "$WORK/$name/logs/worker-1.log" 2>/dev/null && break
      sleep 0.1
    done
    local coordinator
    coordinator=$(cat "$WORK/$name/logs/coordinator.endpoint" 2>/dev/null || true)
    [ -n "$coordinator" ] || coordinator=$(grep -ho 'coordinator on tcp://[0-9.:]*' "$WORK/$name/logs/coordinator.log" | cut -d' ' -f3)
    [ -n "$coordinator" ] || fail "$name: no coordinator endpoint in the logs"
    timeout 120 "$PY3" - "$coordinator" >"$WORK/$name.rogue" 2>&1 <<'PY' &
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

coordinator = sys.argv[1]
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
for i in 1 2; do
  base+=("$(run "base$i")")
  attacked+=("$(run "attacked$i" attack)")
done
echo "images/s unattacked: ${base[*]}; attacked: ${attacked[*]}"
echo "wall s unattacked: $(cat "$WORK"/base*.wall | tr '\n' ' ') attacked: $(cat "$WORK"/attacked*.wall | tr '\n' ' ')"
python3 - "${base[@]}" "${attacked[@]}" <<'PY'
import sys
v = [float(x) for x in sys.argv[1:]]
n = len(v) // 2
print(f"attacked / unattacked (best of {n} each): {max(v[n:]) / max(v[:n]):.3f}")
PY
for i in 1 2; do
  # The run ended on time: an attacked run took at most 10 s more than the slower unattacked one.
  [ "$(cat "$WORK/attacked$i.wall")" -le $(($(cat "$WORK"/base*.wall | sort -n | tail -1) + 10)) ] ||
    fail "attacked$i took $(cat "$WORK/attacked$i.wall") s: the shutdown was held up"
done
for i in 1 2; do
  # The flood was cut to the coordinator's ctl rate (the few replies it sent wait within the
  # peer's bound), said once, and the workers never stalled.
  grep -h "rogue-ctl asks more than" "$WORK/attacked$i/logs/coordinator.log" | head -1 ||
    fail "attacked$i: the coordinator did not cut the flood"
  [ "$(json "$WORK/attacked$i/summary.json" "len(s['stalls'])")" = 0 ] || fail "attacked$i stalled"
done
echo "PASS"
