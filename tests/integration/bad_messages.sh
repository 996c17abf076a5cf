#!/usr/bin/env bash
# Malformed messages of every kind hit a live shard while three workers train through it: each
# gets a logged reason and a count, and training finishes normally. A coordinator probed twice
# logs each peer's dropped messages once and counts them all.
source "$(dirname "$0")/lib.sh"
need_data
timeout 300 "$PSBED" launch --servers 1 --workers 3 --model lenet5 --data mnist --steps 600 --batch 32 --lr 0.01 \
  --mode async --out "$WORK/run" >"$WORK/run.out" 2>&1 &
PIDS+=($!)
endpoint=""
for _ in $(seq 1 200); do
  endpoint=$(grep -o "serving on tcp://[0-9.:]*" "$WORK/run/logs/server-0.log" 2>/dev/null | awk '{print $3}' || true)
  [ -n "$endpoint" ] && grep -q "holds" "$WORK/run/logs/server-0.log" && break
  sleep 0.1
done
[ -n "$endpoint" ] || fail "server-0 never said where it serves"
sent=$(timeout 60 "$PSBED" probe --endpoint "$endpoint" 2>"$WORK/probe.err" | awk '{print $1}' || true)
[[ $sent =~ ^[1-9][0-9]*$ ]] || { cat "$WORK/probe.err"; fail "the probe did not say how many messages it sent"; }
echo "sent $sent malformed messages to $endpoint"
wait "${PIDS[0]}" || { tail -20 "$WORK/run.out"; fail "the run failed"; }
log="$WORK/run/logs/server-0.log"
grep -E "bad|dropped" "$log" | head -30
for reason in "header frame" "magic" "version" "unknown op" "unknown key" "part" "past the end" \
              "payload frame" "maximum message size" "frame" "not a worker id" "multiples of 4" \
              "whose connection this is not"; do
  grep -qi -- "$reason" "$log" || fail "no logged reason mentioning '$reason' in $log"
done
grep -q ", $sent bad messages dropped" "$log" || fail "server-0 did not count $sent bad messages"
json "$WORK/run/summary.json" 'sys.exit(0 if s["ok"] and all(w.get("steps") == 600 for w in s["per_worker"]) else 1)' \
  || fail "training did not finish normally"
echo "test accuracy after the probe: $(json "$WORK/run/summary.json" 's["test_accuracy"]')"
# With nothing listening the probe says so and fails, rather than counting messages sent to nobody.
if timeout 30 "$PSBED" probe --endpoint "$endpoint" >"$WORK/none.out" 2>&1; then fail "a probe to a stopped server succeeded"; fi
grep -q "no connection to $endpoint" "$WORK/none.out" || { cat "$WORK/none.out"; fail "the probe did not say nothing answered"; }
# The coordinator logs a peer's dropped messages once: the probe run twice from the same
# identities adds no line, though each message is counted.
"$PSBED" coordinator --bind "tcp://127.0.0.1:*" --register-timeout 60 --http 127.0.0.1:0 \
  --http-file "$WORK/coord.http" >"$WORK/coord.out" 2>&1 &
coord=$!
PIDS+=($coord)
cep=""
for _ in $(seq 1 100); do
  cep=$(grep -o "tcp://127.0.0.1:[0-9]*" "$WORK/coord.out" | head -1 || true)
  [ -n "$cep" ] && [ -s "$WORK/coord.http" ] && break
  sleep 0.05
done
[ -n "$cep" ] || { cat "$WORK/coord.out"; fail "the coordinator did not say where it listens"; }
timeout 60 "$PSBED" probe --endpoint "$cep" >/dev/null 2>&1 || fail "the probe of the coordinator failed"
sleep 0.5
first=$(grep -c "dropped" "$WORK/coord.out" || true)
timeout 60 "$PSBED" probe --endpoint "$cep" >/dev/null 2>&1 || fail "the second probe of the coordinator failed"
sleep 0.5
again=$(grep -c "dropped" "$WORK/coord.out" || true)
[ "$first" -gt 0 ] || { cat "$WORK/coord.out"; fail "the coordinator logged nothing it dropped"; }
[ "$again" = "$first" ] || { cat "$WORK/coord.out"; fail "the same peers' dropped messages were logged again ($first, then $again lines)"; }
kill -0 "$coord" 2>/dev/null || fail "the coordinator died of the probes"
if type -P curl >/dev/null; then
  counted=$(curl -s "$(cat "$WORK/coord.http")metrics" | awk '/^psbed_bad_messages_total\{role="coordinator"/ {print $2}')
  [ -n "$counted" ] && [ "$counted" -ge $((2 * sent)) ] ||
    fail "the coordinator counted ${counted:-no} dropped messages, expected at least $((2 * sent))"
  echo "coordinator: $first log line(s) for $counted dropped messages from two probes"
fi
kill "$coord"
echo "PASS"
