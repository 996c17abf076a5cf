#!/usr/bin/env bash
# bsp with the fc layers' sufficient factors broadcast worker to worker (--comm sfb, hybrid)
# gives the parameters that --comm ps gives: 3 workers, 100 steps, lenet5 and the MLP, momentum
# and weight decay on. Every worker rebuilds the summed gradient from everyone's factors and
# applies it itself; only float rounding differs from the shards' (the rebuild's product and
# float sum against the workers' own gradients, which a shard sums exactly), so the parameters
# agree to 1e-4 of their largest magnitude. Both sides are deterministic, but a rounding
# difference that moves a ReLU across zero makes a run of lenet5 differ by ~1e-2 now and then
# (docs/results/sfb-hybrid.md): up to three seeds are tried, and at one of them the two must
# match. Async refuses SFB.
source "$(dirname "$0")/lib.sh"
need_data
out_dir() {  # NAME: $WORK/run-NAME, or run-NAME.N for a further run of it
  local d="$WORK/run-$1" n=1
  while [ -e "$d" ]; do n=$((n + 1)); d="$WORK/run-$1.$n"; done
  echo "$d"
}
run() {  # MODEL COMM SEED: 100 steps of bsp, the evaluating worker's parameters in $WORK/MODEL-COMM-SEED.bin
  timeout 200 "$PSBED" launch --servers 2 --workers 3 --model "$1" --data mnist --steps 100 --batch 32 \
    --lr 0.03 --momentum 0.9 --weight-decay 0.0005 --mode bsp --comm "$2" --seed "$3" --threads 1 --no-trace \
    --out "$(out_dir "$1-$2")" --save-params "$WORK/$1-$2-$3.bin" >"$WORK/$1-$2.out" 2>&1 \
    || { cat "$WORK/$1-$2.out"; fail "launch $1 --comm $2 --seed $3 failed"; }
}
compare() {  # MODEL COMM SEED: the parameters against the ps run of that seed
  python3 - "$WORK/$1-ps-$3.bin" "$WORK/$1-$2-$3.bin" "$1 $2 (seed $3)" <<'PY'
import array, sys
a = array.array('f', open(sys.argv[1], 'rb').read())
b = array.array('f', open(sys.argv[2], 'rb').read())
assert len(a) == len(b) and len(a) > 0, (len(a), len(b))
d = max(abs(x - y) for x, y in zip(a, b))
scale = max(abs(x) for x in a)
moved = sum(1 for x, y in zip(a, b) if x != y)
print(f"{sys.argv[3]}: max |ps - sfb| = {d:.3g}, {d / scale:.3g} of max |w| = {scale:.3g}"
      f" ({moved} of {len(a)} parameters differ at all)")
sys.exit(0 if d <= 1e-4 * scale else 1)
PY
}
for model in lenet5 mlp; do
  for comm in sfb hybrid; do
    matched=0
    for seed in 1 2 3; do
      [ -e "$WORK/$model-ps-$seed.bin" ] || run "$model" ps "$seed"
      run "$model" "$comm" "$seed"
      if compare "$model" "$comm" "$seed"; then matched=1; break; fi
    done
    [ "$matched" = 1 ] || fail "$model: --comm $comm parameters differ from --comm ps at every seed"
    # The route each fc layer took is said at the start and kept in the summary and the traces.
    last=$(ls -d "$WORK/run-$model-$comm"* | sort -V | tail -1)
    grep -q "comm $comm: fc1 " "$last/logs/worker-0.log" \
      || fail "$model $comm: the per-layer choice was not printed"
    grep -q "^comm $comm: fc1 sfb, fc2 sfb, fc3 .*; worker-0 sent [0-9.]* [KM]iB of factors" "$WORK/$model-$comm.out" \
      || fail "$model $comm: launch's summary lacks the routes"
    json "$last/summary.json" \
      '"ok" if s["comm"] == "'$comm'" and all(w["factors_refused"] == 0 for w in s["per_worker"]) else sys.exit(1)' \
      >/dev/null || fail "$model $comm: summary lacks comm or counted refused factors"
  done
  # sfb sends every fc layer as factors; nothing of them goes through the shards.
  json "$WORK/run-$model-sfb/summary.json" \
    '"ok" if all(w["bytes_factors"] > 0 for w in s["per_worker"]) else sys.exit(1)' >/dev/null \
    || fail "$model sfb: no factor bytes reported"
done
# Async has no step to gather factors at: refused before anything starts, saying why.
if "$PSBED" launch --servers 1 --workers 2 --model mlp --data mnist --steps 5 --mode async --comm sfb \
  --out "$WORK/async" >"$WORK/async.out" 2>&1; then fail "async with --comm sfb was not refused"; fi
grep -q "needs --mode bsp or ssp:K: async has no step" "$WORK/async.out" \
  || { cat "$WORK/async.out"; fail "async refusal without its reason"; }
# bsp is deterministic on both routes: two runs agree to the bit.
cp "$WORK/mlp-sfb-1.bin" "$WORK/mlp-sfb-first.bin"
run mlp sfb 1
cmp -s "$WORK/mlp-sfb-first.bin" "$WORK/mlp-sfb-1.bin" || fail "two mlp --comm sfb runs differ"
cp "$WORK/lenet5-ps-1.bin" "$WORK/lenet5-ps-first.bin"
run lenet5 ps 1
cmp -s "$WORK/lenet5-ps-first.bin" "$WORK/lenet5-ps-1.bin" || fail "two lenet5 --comm ps runs differ"
echo "mlp sfb, lenet5 ps: two runs agree to the bit"
# sweep passes --comm to every run it launches, and refuses it with async before the first.
timeout 120 "$PSBED" sweep --model mlp --data mnist --workers 2 --policy wfbp --mode bsp --steps 10 --comm hybrid \
  --no-plot --out "$WORK/sweep" >"$WORK/sweep.out" 2>&1 || { cat "$WORK/sweep.out"; fail "sweep --comm hybrid failed"; }
json "$WORK/sweep/bsp-wfbp-unshaped-1s2w/summary.json" '"ok" if s["comm"] == "hybrid" else sys.exit(1)' >/dev/null \
  || fail "sweep --comm hybrid ran with another --comm"
if "$PSBED" sweep --model mlp --data mnist --workers 2 --mode bsp,async --comm sfb --out "$WORK/sweep-async" \
  >"$WORK/sweep-async.out" 2>&1; then fail "sweep with async and --comm sfb was not refused"; fi
grep -q "needs --mode bsp or ssp:K" "$WORK/sweep-async.out" || fail "sweep's async refusal without its reason"
[ ! -e "$WORK/sweep-async/bsp-wfbp-unshaped-1s2w" ] || fail "sweep ran a point before refusing async"
# The factor links have no CURVE: a secured run refuses SFB rather than send factors in the clear.
if "$PSBED" launch --servers 1 --workers 2 --model mlp --data mnist --steps 5 --mode bsp --comm hybrid \
  --secure --out "$WORK/secure" >"$WORK/secure.out" 2>&1; then fail "--secure with --comm hybrid was not refused"; fi
grep -q "factor links have no CURVE yet; use --comm ps" "$WORK/secure.out" \
  || { cat "$WORK/secure.out"; fail "--secure refusal without its reason"; }
echo "PASS"
