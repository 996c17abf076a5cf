#!/usr/bin/env bash
# --replicas 2: a shard SIGKILLed mid-run and started again by hand, with its command line,
# rejoins (lenet5, bsp, 2 shards + 3 workers): its successor sends it the state of every part it
# serves, and it holds the copy from then on. Started once more while that process lives (a
# container restarted at once), the new process replaces it and takes the copy in turn. Then
# the successor is SIGKILLed too, and the
# rejoined shard takes over from its copy: the run ends ok, with the final parameters of an
# unkilled run to the bit (nothing acknowledged was lost, and the copy was exact).
source "$(dirname "$0")/lib.sh"
need_data

STEPS=800
run() {  # NAME: a launch into $WORK/NAME in the background, its pid in LAUNCH
  timeout 200 "$PSBED" launch --servers 2 --workers 3 --model lenet5 --data mnist --steps $STEPS \
    --batch 32 --lr 0.03 --momentum 0.9 --weight-decay 0.0005 --mode bsp --replicas 2 \
    --threads 1 --out "$WORK/$1" --save-params "$WORK/$1.bin" >"$WORK/$1.out" 2>&1 &
  LAUNCH=$!
  PIDS+=($LAUNCH)
}
wait_log() {  # FILE PATTERN SECONDS [COUNT]: until FILE has COUNT (1) lines matching PATTERN
  for _ in $(seq 1 $(($3 * 10))); do
    n=$(grep -c -- "$2" "$1" 2>/dev/null || true)
    [ "${n:-0}" -ge "${4:-1}" ] && return 0
    sleep 0.1
  done
  fail "no '$2' (${4:-1} times) in $1 within $3 s"
}
shard_pid() { pgrep -f -- "server .*--name $1 .*$WORK/kill/" | head -1 || true; }

run ref
rc=0
wait "$LAUNCH" || rc=$?
[ "$rc" = 0 ] || { tail -20 "$WORK/ref.out"; fail "the unkilled run failed"; }

run kill
LOG="$WORK/kill/logs/coordinator.log"
wait_log "$LOG" "cluster complete" 30
sleep 1
pid=$(shard_pid server-0)
[ -n "$pid" ] || fail "no server-0 to kill"
# The command line launch started it with (argv[0] is launch's own binary, /proc/self/exe).
mapfile -d '' -t args </proc/"$pid"/cmdline
kill -KILL "$pid"
wait_log "$LOG" "server-1 serves the parts of server-0" 10
"$PSBED" "${args[@]:1}" >"$WORK/server-0-again.log" 2>&1 &
first=$!
PIDS+=($first)
wait_log "$LOG" "server-0 rejoined" 20
wait_log "$LOG" "server-0 holds a copy of every part again" 20
grep -q "server-0 is back: shard 1 sends it every part it serves" "$WORK/kill/logs/server-1.log" ||
  fail "server-1 did not say it sends server-0 its parts"
"$PSBED" "${args[@]:1}" >"$WORK/server-0-once-more.log" 2>&1 &
again=$!
PIDS+=($again)
wait_log "$LOG" "server-0 registered again: its old process is taken for dead" 20
wait_log "$LOG" "server-0 holds a copy of every part again" 20 2
timeout 20 tail --pid="$first" -f /dev/null || fail "the replaced server-0 process did not stop"
sleep 1
pid=$(shard_pid server-1)
[ -n "$pid" ] || fail "no server-1 to kill (the run ended before it?)"
kill -KILL "$pid"
rc=0
wait "$LAUNCH" || rc=$?
[ "$rc" = 0 ] || { tail -20 "$WORK/kill.out"; fail "the run whose shards were killed failed ($rc)"; }
rc=0
timeout 20 tail --pid="$again" -f /dev/null || fail "the rejoined server-0 did not stop at the end"
wait "$again" || rc=$?
[ "$rc" = 0 ] || { tail -5 "$WORK/server-0-again.log"; fail "the rejoined server-0 exited $rc"; }

S="$WORK/kill/summary.json"
json "$S" 'sys.exit(0 if s["ok"] else 1)' || fail "the summary is not ok"
json "$S" '" ".join(f["server"] + ">" + f["to"] for f in s["failovers"])' |
  grep -qx "server-0>server-1 server-1>server-0" || fail "the summary's fail-overs are not both"
json "$S" 'sys.exit(0 if s["rejoins"][0]["server"] == "server-0" and "copy_at_s" in s["rejoins"][0] else 1)' ||
  fail "the summary has no rejoin of server-0 with its copy"
echo "rejoin: $(json "$S" 's["rejoins"][0]')"
json "$S" 'sys.exit(0 if s["replication"]["server-0"]["replicated"] > 0 else 1)' ||
  fail "the rejoined server-0 applied no forward to its copy"
python3 - "$WORK/ref.bin" "$WORK/kill.bin" <<'PY' || fail "the parameters are not the unkilled run's"
import array, sys
a = array.array('f', open(sys.argv[1], 'rb').read())
b = array.array('f', open(sys.argv[2], 'rb').read())
assert len(a) == len(b) and len(a) > 0, (len(a), len(b))
moved = sum(1 for x, y in zip(a, b) if x != y)
print(f"killed, rejoined, killed against unkilled: {moved} of {len(a)} parameters differ")
sys.exit(0 if moved == 0 else 1)
PY
echo "accuracy: $(json "$S" 's["test_accuracy"] * 100')% (unkilled $(json "$WORK/ref/summary.json" 's["test_accuracy"] * 100')%)"

echo "PASS"
