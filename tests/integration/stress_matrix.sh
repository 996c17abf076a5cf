#!/usr/bin/env bash
# Every policy x shards {1, 2, 4} x mode {async, bsp} x model {lenet5 cut into many small parts,
# a model of large fully-connected tensors} x link {unshaped, shaped with tiny queues and a small
# credit}, a few steps each, under a watchdog: a run that makes no progress for 10 s (the
# coordinator's stall report, or no end) fails the test, after every thread's stack of the run's
# processes is printed (gdb). Transport threads are strict here (PSBED_STRICT_THREADS=1): one
# that would wait on a send aborts its process at once.
#
# PSBED_STRESS_FILTER=REGEX runs only the cases whose name matches (e.g. 'p3-s2').
source "$(dirname "$0")/lib.sh"
export PSBED_STRICT_THREADS="${PSBED_STRICT_THREADS:-1}"
FILTER="${PSBED_STRESS_FILTER:-.}"
STALL_S=10
MODEL_FC="$SRC/tests/fixtures/models/stress-fc.toml"

# stacks RUN: every thread's stack of every process of that run (gdb when there, else what
# /proc says each thread waits in).
stacks() {
  for pid in $(pgrep -f -- "$WORK/$1/" || true); do
    echo "=== $(tr '\0' ' ' </proc/"$pid"/cmdline 2>/dev/null | cut -c1-160)"
    if type -P gdb >/dev/null; then
      timeout 30 gdb -p "$pid" -batch -ex "thread apply all bt 12" 2>/dev/null | grep -E '^(Thread|#)' | head -150
    else
      for t in /proc/"$pid"/task/*; do echo "$(cat "$t/comm") $(cat "$t/wchan" 2>/dev/null)"; done
    fi
  done
}

# watch NAME ARGS...: one launch, watched. A run that finishes passes; one that stalls (the
# coordinator says "no progress for") or runs past 60 s fails with the stacks.
watch() {
  local name="$1"
  shift
  "$PSBED" launch --out "$WORK/$name" --workers 2 --data synthetic --steps 6 --batch 8 --threads 1 \
    --stall-timeout "$STALL_S" --heartbeat-timeout 20 --timeout 120 "$@" >"$WORK/$name.out" 2>&1 &
  local pid=$! started=$SECONDS
  while kill -0 "$pid" 2>/dev/null; do
    if grep -q "no progress for" "$WORK/$name/logs/coordinator.log" 2>/dev/null ||
      [ $((SECONDS - started)) -gt 60 ]; then
      echo "STALL in $name after $((SECONDS - started)) s:"
      grep -h "no progress for" "$WORK/$name/logs/coordinator.log" 2>/dev/null | tail -1
      stacks "$name"
      tail -20 "$WORK/$name.out"
      fail "$name made no progress for ${STALL_S} s (stacks above)"
    fi
    sleep 0.5
  done
  wait "$pid" || { tail -30 "$WORK/$name.out"; tail -5 "$WORK/$name"/logs/*.log; fail "$name failed"; }
  [ "$(json "$WORK/$name/summary.json" "s['ok']")" = True ] || fail "$name: summary not ok"
  rm -rf "${WORK:?}/$name"  # keeps the folder small: 144 runs
  echo "ok $name ($((SECONDS - started)) s)"
}

# run NAME ARGS...: watch in the background, two at a time (one per core: the cases are many and
# short, and a deadlock does not need the machine to itself). The first case to fail fails the
# test; cleanup stops the other, whose processes all name this test's folder.
cases=0
run() {
  [[ "$1" =~ $FILTER ]] || return 0
  cases=$((cases + 1))
  while [ "$(jobs -rp | wc -l)" -ge 2 ]; do wait -n || fail "a case failed (above)"; done
  watch "$@" &
}

for policy in bulk wfbp tf-random p3 bytescheduler prophet; do
  for shards in 1 2 4; do
    for mode in async bsp; do
      # Many small parts: lenet5 cut at 16 KiB; p3 and prophet slice them further.
      run "$policy-s$shards-$mode-lenet5-unshaped" --model lenet5 --servers "$shards" --mode "$mode" \
        --policy "$policy" --partition-bytes 16KiB --slice-params 2000
      run "$policy-s$shards-$mode-fc-unshaped" --model "$MODEL_FC" --servers "$shards" --mode "$mode" \
        --policy "$policy"
      # Back-pressure everywhere: one message per ZeroMQ queue and a small credit.
      credit=()
      case "$policy" in p3 | bytescheduler | prophet) credit=(--credit 256KiB) ;; esac
      PSBED_QUEUE_DEPTH=1 run "$policy-s$shards-$mode-lenet5-shaped" --model lenet5 --servers "$shards" \
        --mode "$mode" --policy "$policy" --partition-bytes 16KiB --slice-params 2000 "${credit[@]}" \
        --bandwidth 100mbit
      PSBED_QUEUE_DEPTH=1 run "$policy-s$shards-$mode-fc-shaped" --model "$MODEL_FC" --servers "$shards" \
        --mode "$mode" --policy "$policy" "${credit[@]}" --bandwidth 1gbit
    done
  done
done
while [ -n "$(jobs -rp)" ]; do wait -n || fail "a case failed (above)"; done
[ "$cases" -gt 0 ] || fail "no case matches PSBED_STRESS_FILTER=$FILTER"
echo "PASS: $cases runs, none stalled"
