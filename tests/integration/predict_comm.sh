#!/usr/bin/env bash
# The predictor routes the fc layers as --comm says: predict --comm hybrid and sfb name the
# route in each row and predict another figure than ps, async with sfb is refused with the
# live worker's words, and validate predicts a measured --comm sfb run with the comm its
# summary.json records.
source "$(dirname "$0")/lib.sh"
PROFILE="$SRC/tests/fixtures/predictor/regression/profile.json"
predict() {
  timeout 120 "$PSBED" predict --profile "$PROFILE" --workers 3 --servers 1 --policy wfbp \
    --bandwidth 100mbit --steps 20 --seeds 1 "$@"
}
for comm in ps sfb hybrid; do
  predict --comm "$comm" --json "$WORK/$comm.json" >"$WORK/$comm.out" 2>&1 ||
    { cat "$WORK/$comm.out"; fail "predict --comm $comm"; }
done
grep -q "^comm hybrid, 3 worker(s), 1 server(s): fc1 sfb" "$WORK/hybrid.out" ||
  { cat "$WORK/hybrid.out"; fail "predict --comm hybrid does not print the route"; }
python3 - "$WORK" <<'PY' || fail "predict --comm rows"
import json, sys
rows = {c: json.load(open(f"{sys.argv[1]}/{c}.json"))[0] for c in ("ps", "sfb", "hybrid")}
for c, r in rows.items():
    assert r["comm"] == c, r
assert "sfb" not in rows["ps"]["comm_layers"], rows["ps"]
assert "fc1 sfb" in rows["hybrid"]["comm_layers"], rows["hybrid"]
# lenet5's fc layers hold most of its bytes: off the one shard, the step is shorter.
assert rows["sfb"]["images_per_sec"] > rows["ps"]["images_per_sec"], rows
assert rows["hybrid"]["images_per_sec"] > rows["ps"]["images_per_sec"], rows
PY
echo "predict --comm: each row names its route; sfb and hybrid beat ps on lenet5 at 100 Mbit/s"

# async has no step at which every worker's factors are gathered: refused before simulating.
if predict --comm sfb --mode async >"$WORK/async.out" 2>&1; then fail "predict --comm sfb --mode async ran"; fi
grep -qF "psbed: error: --comm sfb needs --mode bsp or ssp:K: async has no step at which every worker's factors are gathered" "$WORK/async.out" ||
  { cat "$WORK/async.out"; fail "no word on --comm sfb with async"; }
[ "$(grep -c . "$WORK/async.out")" = 1 ] || { cat "$WORK/async.out"; fail "more than one line"; }
echo "predict --comm sfb --mode async: refused with the live worker's words"

# A measured run's comm comes from its summary.json.
timeout 120 "$PSBED" launch --servers 1 --workers 2 --model lenet5 --data synthetic --steps 20 \
  --batch 32 --mode bsp --bandwidth 100mbit --compute "replay:$PROFILE" --comm sfb \
  --out "$WORK/sfb-run" >"$WORK/launch.out" 2>&1 &
PIDS+=($!)
wait "${PIDS[0]}" || { tail -20 "$WORK/launch.out"; fail "the --comm sfb run failed"; }
json "$WORK/sfb-run/summary.json" 'sys.exit(0 if s["comm"] == "sfb" else 1)' ||
  fail "summary.json does not record --comm sfb"
timeout 120 "$PSBED" validate --profile "$PROFILE" "$WORK/sfb-run" --seeds 1 --python /bin/false \
  --out "$WORK/report" >"$WORK/validate.out" 2>&1 || { cat "$WORK/validate.out"; fail "validate"; }
grep -q "comm sfb" "$WORK/validate.out" || { cat "$WORK/validate.out"; fail "validate does not say the comm"; }
python3 - "$WORK/report/validation.json" <<'PY' || fail "validate of the --comm sfb run"
import json, math, sys
v = json.load(open(sys.argv[1]))
r = v["runs"][0]
assert r["comm"] == "sfb" and r["workers"] == 2, r
assert r["measured_images_per_sec"] > 0 and math.isfinite(r["error_pct"]), r
print(f"validate: measured {r['measured_images_per_sec']:.0f} images/s, predicted {r['predicted_images_per_sec']:.0f} (comm sfb)")
PY
grep -q "| comm |" "$WORK/report/validation.md" || fail "the report has no comm column"
echo "PASS"
