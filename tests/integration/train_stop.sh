#!/usr/bin/env bash
# `psbed train` stopped by SIGTERM: it ends at a step boundary, writes its results over the steps
# it did (stopped_by, planned_steps) and exits 130, as a stopped node does; nothing is lost.
source "$(dirname "$0")/lib.sh"
need_data
timeout 120 "$PSBED" train --model lenet5 --data mnist --steps 1000000 --batch 32 --threads 1 \
  --json "$WORK/train.json" >"$WORK/train.out" 2>&1 &
PIDS+=($!)
pid=""
for _ in $(seq 1 200); do  # the training process (under timeout), once it reports progress
  pid=$(pgrep -f -- "train --model lenet5 .*$WORK/train.json" | while read -r p; do
    [ "$(cat /proc/"$p"/comm 2>/dev/null)" != timeout ] && echo "$p"; done | head -1)
  [ -n "$pid" ] && grep -q "step .*images/s" "$WORK/train.out" && break
  sleep 0.1
done
[ -n "$pid" ] || { cat "$WORK/train.out"; fail "the training never reported progress"; }
kill -TERM "$pid"
rc=0
wait "${PIDS[0]}" || rc=$?
tail -3 "$WORK/train.out"
[ "$rc" = 130 ] || fail "train stopped by SIGTERM exited $rc, expected 130"
grep -q "stopped by SIGTERM after [0-9]* of 1000000 steps" "$WORK/train.out" || fail "no line saying it was stopped"
json "$WORK/train.json" 'sys.exit(0 if s["stopped_by"] == "SIGTERM" and s["planned_steps"] == 1000000 and 0 < s["steps"] < 1000000 and s["images_per_sec"] > 0 else 1)' ||
  { cat "$WORK/train.json"; fail "the results do not hold the steps it did"; }
echo "PASS"
