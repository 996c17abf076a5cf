#!/usr/bin/env bash
# 2 servers + 3 workers train lenet5 on the digits to >= 95% test accuracy, in async and in bsp.
source "$(dirname "$0")/lib.sh"
need_data
# Async applies each worker's gradient alone, on parameters a few updates old (more when a
# worker is descheduled on this host's few cores), so it takes a smaller step than bsp, which
# averages the three gradients of a clock into one update, and more epochs. At lr 0.01, 3 of 312
# runs over 4 epochs and 1 of 61 over 5 ended below 95% (88.7-94.55%: the step overshot); at lr
# 0.005 over 5 epochs, 100 of 100 reached 96.0-96.8% (README, "Consistency").
for cfg in "async 0.005 5" "bsp 0.05 3"; do
  set -- $cfg
  timeout 300 "$PSBED" launch --servers 2 --workers 3 --model lenet5 --data mnist --epochs "$3" --batch 32 \
    --lr "$2" --mode "$1" --out "$WORK/$1" >"$WORK/$1.out" 2>&1 || { cat "$WORK/$1.out"; fail "launch $1 failed"; }
  acc=$(json "$WORK/$1/summary.json" 's["test_accuracy"]')
  echo "$1: test accuracy $acc, $(json "$WORK/$1/summary.json" 's["images_per_sec"]') images/s"
  # On a failure, what the run did, to tell a run that diverged from a fault: each worker's pace
  # and each shard's counts.
  python3 -c "import sys; sys.exit(0 if float('$acc') >= 0.95 else 1)" || {
    grep -h "registered as\|cluster complete\|trained .* steps\|shutting down" "$WORK/$1/logs/"*.log "$WORK/$1.out" || true
    fail "$1: test accuracy $acc < 0.95"
  }
  n=$(ls "$WORK/$1/traces" | wc -l)
  [ "$n" -eq 5 ] || fail "$1: expected 5 traces (2 servers + 3 workers), found $n"
  json "$WORK/$1/summary.json" '"ok" if s["ok"] and len(s["per_worker"]) == 3 and s["mode"] == "'$1'" else sys.exit(1)' >/dev/null \
    || fail "$1: summary incomplete"
done
echo "PASS"
