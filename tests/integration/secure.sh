#!/usr/bin/env bash
# `launch --secure`: every link is CURVE, and only listed keys get in. While the run trains, a
# rogue raw ZeroMQ client, once without CURVE and once with a key of its own (not listed), tries
# to register at the coordinator, ask it for its status (ctl), and push and pull at the shard:
# nothing answers it, each refusal is logged (one line per key) and counted, and the run
# finishes as it would have. ctl with the run's key is answered; ctl without keys is not.
source "$(dirname "$0")/lib.sh"
need_data
PY=/usr/bin/python3
"$PY" -c 'import zmq, sys; sys.exit(0 if zmq.has("curve") else 1)' 2>/dev/null ||
  skip "no python3-zmq with CURVE at $PY"
# worker-0 sleeps 10 ms a step: the run lasts 15 s or more however fast the host, longer than
# the rogue's tries (each waits 1 s for an answer that must not come).
steps=1500
timeout 300 "$PSBED" launch --secure --servers 1 --workers 2 --model lenet5 --data mnist --straggler-ms 10 \
  --steps $steps --batch 32 --lr 0.01 --mode async --out "$WORK/run" >"$WORK/run.out" 2>&1 &
PIDS+=($!)
keys="$WORK/run/keys"
shard=""
for _ in $(seq 1 300); do
  shard=$(grep -o "serving on tcp://[0-9.:]*" "$WORK/run/logs/server-0.log" 2>/dev/null | awk '{print $3}' || true)
  [ -n "$shard" ] && grep -q "holds" "$WORK/run/logs/server-0.log" && break
  sleep 0.1
done
[ -n "$shard" ] || { tail -20 "$WORK/run.out"; fail "server-0 never said where it serves"; }
coord=$(cat "$WORK/run/logs/coordinator.endpoint")
for f in coordinator.key server-0.key worker-0.key worker-1.key ctl.key; do
  [ "$(stat -c %a "$keys/$f")" = 600 ] || fail "$keys/$f is not mode 0600"
done
[ "$(grep -vc '^#' "$keys/authorized_keys")" = 5 ] || fail "authorized_keys does not list the run's 5 keys"

# The rogue: each message as a real node would send it (a 64-byte header, then JSON or data).
cat >"$WORK/rogue.py" <<'PYEOF'
import json, struct, sys, zmq
endpoint, target, mode, keydir = sys.argv[1:5]
def header(op, key=0, part=0, offset=0, length=0, seq=1):
    return struct.pack("<IHBBIIIiQQQQQ", 0x50534244, 1, op, 0, 0, key, part, 0, offset, length, 0, seq, 0)
ctx = zmq.Context()
s = ctx.socket(zmq.DEALER)
s.setsockopt(zmq.LINGER, 0)
s.setsockopt(zmq.IDENTITY, b"rogue-" + mode.encode())
if mode != "nokey":
    if mode == "listed":
        secret = open(keydir + "/ctl.key").read().split()[0].encode()
        public = zmq.curve_public(secret)
    else:  # one unlisted pair for every try: its refusals are logged once, then counted
        try:
            secret = open(keydir + "/rogue.key").read().split()[0].encode()
        except FileNotFoundError:
            public, secret = zmq.curve_keypair()
            open(keydir + "/rogue.key", "w").write(secret.decode() + "\n")
            open(keydir + "/rogue.pub", "w").write(public.decode() + "\n")
        public = zmq.curve_public(secret)
    s.curve_secretkey, s.curve_publickey = secret, public
    s.curve_serverkey = open(keydir + "/" + ("coordinator" if target != "shard" else "server-0") + ".pub").read().split()[0].encode()
s.connect(endpoint)
def ask(frames):
    try:  # a refused handshake leaves no connection to queue to: the send would wait for ever
        s.send_multipart(frames, flags=zmq.NOBLOCK)
    except zmq.Again:
        return False
    return s.poll(1000) != 0
if target == "register":
    reg = json.dumps({"role": "worker", "name": "rogue", "address": ""}).encode()
    answered = ask([header(1, length=len(reg)), reg])
elif target == "ctl":
    req = json.dumps({"event": "ctl", "command": "status"}).encode()
    answered = ask([header(11, length=len(req)), req])
elif target == "shard":
    grad = struct.pack("<f", 0.0)
    answered = ask([header(5, length=4, seq=1)]) or ask([header(3, length=4, seq=2), grad])
print("answered" if answered else "no answer")
PYEOF
rogue() { timeout 30 "$PY" "$WORK/rogue.py" "$@" "$WORK"; }
cp "$keys"/*.pub "$WORK"/ && cp "$keys/ctl.key" "$WORK"/
for mode in nokey unlisted; do
  for target in register ctl; do
    [ "$(rogue "$coord" $target $mode)" = "no answer" ] || fail "a rogue client ($mode) was answered at the coordinator ($target)"
  done
  [ "$(rogue "$shard" shard $mode)" = "no answer" ] || fail "a rogue client ($mode) was answered at the shard (pull, push)"
  echo "rogue client ($mode): no answer to register, ctl status, pull or push"
done
# The same client with a listed key is answered: the rogue's silence is the keys' doing.
[ "$(rogue "$coord" ctl listed)" = "answered" ] || fail "a client with a listed key got no answer from the coordinator"
# All of it while the run trained: the refusals cost it nothing it would notice.
[ ! -e "$WORK/run/summary.json" ] || fail "the run ended before the rogue client was done: give it more --steps"
timeout 30 "$PSBED" ctl --run "$WORK/run" status >"$WORK/ctl.out" 2>&1 || { cat "$WORK/ctl.out"; fail "ctl --run with the run's keys failed"; }
if timeout 30 "$PSBED" ctl --coordinator "$coord" --timeout 5 status >"$WORK/ctl-plain.out" 2>&1; then
  fail "ctl without keys was answered by a --secure coordinator"
fi
grep -q "needs ctl --keys" "$WORK/ctl-plain.out" || { cat "$WORK/ctl-plain.out"; fail "ctl without keys did not say why"; }
wait "${PIDS[0]}" || { tail -20 "$WORK/run.out"; fail "the secure run failed"; }
json "$WORK/run/summary.json" "sys.exit(0 if s['ok'] and all(w.get('steps') == $steps for w in s['per_worker']) else 1)" ||
  fail "the run did not finish every step"
echo "test accuracy: $(json "$WORK/run/summary.json" 's["test_accuracy"]')"
# Each refused key is logged once, with its key, then counted; a client without CURVE fails its
# handshake, logged once and counted.
rogue_key=$(cat "$WORK/rogue.pub")
for log in coordinator server-0; do
  f="$WORK/run/logs/$log.log"
  grep "refused" "$f" || true
  grep -qF "public key $rogue_key is not in the authorized keys" "$f" || fail "$log did not log the rogue's key"
  [ "$(grep -cF "public key $rogue_key" "$f")" = 1 ] || fail "$log logged the rogue's key more than once"
  grep -q "handshake failed" "$f" || fail "$log did not log the client without CURVE"
  grep -Eq "refused [1-9][0-9]* connection\(s\) with an unlisted key and [1-9][0-9]* failed handshake" "$f" ||
    fail "$log did not count its refusals"
done
echo "PASS"
