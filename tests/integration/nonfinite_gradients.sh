#!/usr/bin/env bash
# A worker whose gradients turn NaN or infinite (here: a learning rate of 10^30) is stopped by
# the shards' refusal, naming the tensor and the way out, and the shards count what they refused;
# with --allow-nonfinite the same run goes through to a diverged model.
source "$(dirname "$0")/lib.sh"
need_data
args=(--servers 1 --workers 1 --model lenet5 --data mnist --steps 40 --batch 32 --lr 1e30 --mode bsp --threads 1)
if timeout 120 "$PSBED" launch "${args[@]}" --out "$WORK/refused" >"$WORK/refused.out" 2>&1; then
  fail "a run with non-finite gradients succeeded"
fi
reason=$(json "$WORK/refused/summary.json" "s['failed_nodes'][0]['reason']")
echo "worker-0 failed: $reason"
case "$reason" in
  *"server-0 refused the gradient of "*"NaN or infinity"*"--allow-nonfinite"*) ;;
  *) fail "the failure does not name the refused gradient: $reason" ;;
esac
grep -q "bad messages, non-finite gradient: [1-9]" "$WORK/refused/logs/server-0.log" ||
  fail "server-0 did not count the refused pushes"
timeout 120 "$PSBED" launch "${args[@]}" --allow-nonfinite --out "$WORK/allowed" >"$WORK/allowed.out" 2>&1 ||
  { tail -20 "$WORK/allowed.out"; fail "--allow-nonfinite: the run failed"; }
grep -q "training diverged" "$WORK/allowed.out" || { tail "$WORK/allowed.out"; fail "--allow-nonfinite: no divergence said"; }
[ "$(json "$WORK/allowed/summary.json" "s['steps']")" = 40 ] || fail "--allow-nonfinite: not every step ran"
echo "PASS"
