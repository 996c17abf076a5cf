#!/usr/bin/env bash
# The coordinator takes a worker's link id (the identity of its connections to the shards) only
# when no worker's further connection (--connections: the link id + "~k") could be mistaken for
# it: not ending in ~ and a digit, and with room for "~k" within ZeroMQ's 255 bytes. A refused
# registration is answered with the reason; the coordinator keeps waiting for real workers.
source "$(dirname "$0")/lib.sh"
PY3=/usr/bin/python3
"$PY3" -c 'import zmq' 2>/dev/null || skip "python3-zmq is not installed (cluster/install-deps.sh test)"
"$PSBED" coordinator --bind "tcp://127.0.0.1:*" --endpoint-file "$WORK/endpoint" --servers 1 --workers 2 \
  --model lenet5 >"$WORK/coordinator.out" 2>&1 &
PIDS+=("$!")
for _ in $(seq 100); do [ -s "$WORK/endpoint" ] && break; sleep 0.1; done
[ -s "$WORK/endpoint" ] || { cat "$WORK/coordinator.out"; fail "the coordinator wrote no endpoint"; }
timeout 60 "$PY3" - "$(cat "$WORK/endpoint")" <<'PY' || fail "the link id checks"
import json, struct, sys
import zmq

def header(op, length):
    return struct.pack("<IHBBIIIiQQQQQ", 0x50534244, 1, op, 0, 0, 0, 0, 0, 0, length, 0, 0, 0)

ctx = zmq.Context()
def register(identity, link_id):
    s = ctx.socket(zmq.DEALER)
    s.setsockopt(zmq.IDENTITY, identity)
    s.setsockopt(zmq.LINGER, 0)
    s.connect(sys.argv[1])
    reg = json.dumps({"role": "worker", "name": "", "link_id": link_id}).encode()
    s.send_multipart([header(1, len(reg)), reg])
    return s.recv_multipart()[-1].decode() if s.poll(5000) else None

for link_id, why in [("worker-0#0123456789abcdef~1", "ends in ~ and a digit"),
                     ("w" * 254, "expected 16 to 253")]:
    answer = register(b"probe-%d" % len(link_id), link_id)
    print("link id of", len(link_id), "bytes:", answer)
    assert answer and why in answer, answer
# One that is fine is taken.
answer = register(b"probe-ok", "worker-0#0123456789abcdef")
assert answer and '"registered"' in answer, answer
PY
grep -q "registration of .* refused: link_id ends in ~ and a digit" "$WORK/coordinator.out" ||
  fail "the coordinator did not log the refusal"
echo "PASS"
