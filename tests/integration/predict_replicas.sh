#!/usr/bin/env bash
# The predictor models --replicas 2: predict --replicas 2 names the copies in each row and
# predicts a lower figure than one copy on a link-bound configuration, a bad value is refused
# in one line, and validate predicts a measured --replicas 2 run with the copies its
# summary.json records.
source "$(dirname "$0")/lib.sh"
PROFILE="$SRC/tests/fixtures/predictor/regression/profile.json"
predict() {
  timeout 120 "$PSBED" predict --profile "$PROFILE" --workers 3 --servers 2 --policy wfbp \
    --bandwidth 100mbit --steps 20 --seeds 1 "$@"
}
for mode in bsp async; do
  for r in 1 2; do
    predict --mode "$mode" --replicas "$r" --json "$WORK/$mode-$r.json" >"$WORK/$mode-$r.out" 2>&1 ||
      { cat "$WORK/$mode-$r.out"; fail "predict --mode $mode --replicas $r"; }
  done
done
python3 - "$WORK" <<'PY' || fail "predict --replicas rows"
import json, sys
for mode in ("bsp", "async"):
    one, two = (json.load(open(f"{sys.argv[1]}/{mode}-{r}.json"))[0] for r in (1, 2))
    assert one["replicas"] == 1 and two["replicas"] == 2, (one, two)
    # Every update crosses a shard's link once more, on links that are the bottleneck.
    assert two["images_per_sec"] < one["images_per_sec"], (mode, one, two)
    print(f"{mode}: 1 copy {one['images_per_sec']:.0f} images/s, 2 copies {two['images_per_sec']:.0f}")
PY
echo "predict --replicas 2: each row says its copies, and they cost on a 100 Mbit/s link"

if predict --replicas 3 >"$WORK/bad.out" 2>&1; then fail "predict --replicas 3 ran"; fi
grep -q -- "--replicas" "$WORK/bad.out" || { cat "$WORK/bad.out"; fail "no word on --replicas 3"; }
[ "$(grep -c . "$WORK/bad.out")" = 1 ] || { cat "$WORK/bad.out"; fail "more than one line"; }
echo "predict --replicas 3: refused in one line"

# A measured run's copies come from its summary.json.
timeout 120 "$PSBED" launch --servers 2 --workers 2 --model lenet5 --data synthetic --steps 20 \
  --batch 32 --mode bsp --bandwidth 100mbit --compute "replay:$PROFILE" --replicas 2 \
  --out "$WORK/r2-run" >"$WORK/launch.out" 2>&1 &
PIDS+=($!)
wait "${PIDS[0]}" || { tail -20 "$WORK/launch.out"; fail "the --replicas 2 run failed"; }
json "$WORK/r2-run/summary.json" 'sys.exit(0 if s["replicas"] == 2 else 1)' ||
  fail "summary.json does not record --replicas 2"
timeout 120 "$PSBED" validate --profile "$PROFILE" "$WORK/r2-run" --seeds 1 --python /bin/false \
  --out "$WORK/report" >"$WORK/validate.out" 2>&1 || { cat "$WORK/validate.out"; fail "validate"; }
python3 - "$WORK/report/validation.json" <<'PY' || fail "validate of the --replicas 2 run"
import json, math, sys
r = json.load(open(sys.argv[1]))["runs"][0]
assert r["replicas"] == 2 and r["servers"] == 2, r
assert r["measured_images_per_sec"] > 0 and math.isfinite(r["error_pct"]), r
print(f"validate: measured {r['measured_images_per_sec']:.0f} images/s, predicted {r['predicted_images_per_sec']:.0f} (2 copies)")
PY
echo "PASS"
