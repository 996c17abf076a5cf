#!/usr/bin/env bash
# bsp with one worker (and two shards) gives the same parameters as single-process training,
# whatever the transmission policy: p3 cuts every part into 5,000-parameter slices, bulk holds
# gradients until backward ends, and the result must not change by a bit. Nor with --push-pull,
# where each push (here each p3 slice) is answered with the updated floats and nothing is pulled
# after the first step. Nor over 2
# connections a shard (--connections 2), where fc1's 48,000 floats go as two stripes, each on its
# own connection, and p3's slices are cut at the stripe boundary.
source "$(dirname "$0")/lib.sh"
need_data
timeout 120 "$PSBED" train --model lenet5 --data mnist --steps 60 --batch 64 --lr 0.03 --threads 1 --no-eval \
  --save-params "$WORK/train.bin" >"$WORK/train.out" 2>&1 || { cat "$WORK/train.out"; fail "train failed"; }
for variant in wfbp p3 bulk "p3 --push-pull" "p3 --connections 2"; do
policy=${variant%% *}
extra=${variant#$policy}
rm -f "$WORK/ps.bin"  # each policy's own parameters, never the previous run's
# shellcheck disable=SC2086  # $extra: the variant's flags, word by word
timeout 300 "$PSBED" launch --servers 2 --workers 1 --model lenet5 --data mnist --steps 60 --batch 64 --lr 0.03 \
  --mode bsp --policy "$policy" --slice-params 5000 --credit 40KiB --out "$WORK/run-${variant// /}" $extra \
  --save-params "$WORK/ps.bin" >"$WORK/run.out" 2>&1 || { cat "$WORK/run.out"; fail "launch ($variant) failed"; }
if [[ $extra == *--push-pull* ]]; then
  grep -q '"push_pull": true' "$WORK/run-${variant// /}/summary.json" || fail "the summary does not say push_pull"
fi
if [[ $extra == *--connections* ]]; then
  grep -q '"connections": 2' "$WORK/run-${variant// /}/summary.json" || fail "the summary does not say connections"
  for s in 0 1; do
    grep -q ", 0 bad messages dropped" "$WORK/run-${variant// /}/logs/server-$s.log" ||
      fail "server-$s dropped messages over 2 connections"
  done
fi
echo -n "$variant: "
python3 - "$WORK/train.bin" "$WORK/ps.bin" <<'PY'
import array, sys
a = array.array('f', open(sys.argv[1], 'rb').read())
b = array.array('f', open(sys.argv[2], 'rb').read())
assert len(a) == len(b) == 61706, (len(a), len(b))
d = max(abs(x - y) for x, y in zip(a, b))
moved = max(abs(x) for x in a)
print(f"max |train - ps| = {d:.3g} over {len(a)} parameters (max |w| = {moved:.3g})")
sys.exit(0 if d == 0 else 1)
PY
done
echo "PASS"
