#!/usr/bin/env bash
# Malformed messages of every kind hit a live shard while three workers train through it: each
# gets a logged reason and a count, and training finishes normally.
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
              "payload frame" "maximum message size" "frame" "not a worker id" "multiples of 4"; do
  grep -qi -- "$reason" "$log" || fail "no logged reason mentioning '$reason' in $log"
done
grep -q ", $sent bad messages dropped" "$log" || fail "server-0 did not count $sent bad messages"
json "$WORK/run/summary.json" 'sys.exit(0 if s["ok"] and all(w.get("steps") == 600 for w in s["per_worker"]) else 1)' \
  || fail "training did not finish normally"
echo "test accuracy after the probe: $(json "$WORK/run/summary.json" 's["test_accuracy"]')"
# With nothing listening the probe says so and fails, rather than counting messages sent to nobody.
if timeout 30 "$PSBED" probe --endpoint "$endpoint" >"$WORK/none.out" 2>&1; then fail "a probe to a stopped server succeeded"; fi
grep -q "no connection to $endpoint" "$WORK/none.out" || { cat "$WORK/none.out"; fail "the probe did not say nothing answered"; }
echo "PASS"
