#!/usr/bin/env bash
# A model spec that psbed does not ship goes through the whole flow: a single worker trains it,
# `psbed profile` profiles that run, `psbed predict` predicts two workers, `psbed launch` runs
# them (compute replay of the profile) and `psbed validate` puts measured beside predicted.
source "$(dirname "$0")/lib.sh"
cat >"$WORK/blocks.toml" <<'TOML'
# Not shipped: two conv blocks and a classifier for 3x16x16 inputs.
name = "blocks"
input = [3, 16, 16]
classes = 10

[[layer]]
type = "conv"
name = "stem"
in_channels = 3
out_channels = 16
kernel = 3
pad = 1

[[layer]]
type = "relu"

[[layer]]
type = "maxpool"
kernel = 2

[[layer]]
type = "conv"
name = "body"
in_channels = 16
out_channels = 32
kernel = 3
pad = 1

[[layer]]
type = "relu"

[[layer]]
type = "maxpool"
kernel = 2

[[layer]]
type = "fc"
name = "head"
in = 512
out = 10
TOML
MODEL="$WORK/blocks.toml"
timeout 120 "$PSBED" launch --servers 1 --workers 1 --model "$MODEL" --data synthetic --steps 80 --batch 16 \
  --threads 1 --mode bsp --bandwidth 100mbit --out "$WORK/single" >"$WORK/single.out" 2>&1 ||
  { tail -20 "$WORK/single.out"; fail "the single-worker run failed"; }
timeout 120 "$PSBED" profile "$WORK/single" -o "$WORK/profile.json" >"$WORK/profile.out" 2>&1 ||
  { cat "$WORK/profile.out"; fail "profile failed"; }
json "$WORK/profile.json" 's["model"]' | grep -qx blocks || fail "the profile does not name the model"
# The copy cost is measured anew on every extraction; given the recorded one, the same run gives
# the same profile again.
copy=$(json "$WORK/profile.json" 's["host"]["cpu_per_byte_ns"]') || fail "the profile records no host CPU"
timeout 120 "$PSBED" profile "$WORK/single" -o "$WORK/again.json" --copy-ns-per-byte "$copy" >"$WORK/again.out" 2>&1 ||
  { cat "$WORK/again.out"; fail "profile --copy-ns-per-byte failed"; }
cmp -s "$WORK/profile.json" "$WORK/again.json" ||
  fail "profile --copy-ns-per-byte $copy did not reproduce the profile"
timeout 120 "$PSBED" profile "$WORK/single" -o "$WORK/bad.json" --copy-ns-per-byte -1 >"$WORK/bad.out" 2>&1 &&
  fail "a negative copy cost was accepted"
grep -q "copy-ns-per-byte" "$WORK/bad.out" || { cat "$WORK/bad.out"; fail "the error does not name the option"; }
timeout 120 "$PSBED" predict --profile "$WORK/profile.json" --workers 2 --arrival-jitter-us -1 >"$WORK/bad.out" 2>&1 &&
  fail "a negative arrival jitter was accepted"
grep -q "arrival-jitter-us: expected microseconds, 0 or more" "$WORK/bad.out" ||
  { cat "$WORK/bad.out"; fail "the jitter's error does not say what was expected"; }
timeout 120 "$PSBED" predict --profile "$WORK/profile.json" --workers 2 --policy wfbp --mode bsp --steps 60 \
  --json "$WORK/predicted.json" >"$WORK/predict.out" 2>&1 || { cat "$WORK/predict.out"; fail "predict failed"; }
predicted=$(json "$WORK/predicted.json" 's[0]["images_per_sec"]')
# Several configurations on one thread or three: the same figures.
for jobs in 1 3; do
  timeout 120 "$PSBED" predict --profile "$WORK/profile.json" --workers 1,2,3 --policy wfbp,p3 --mode bsp --steps 30 \
    --jobs $jobs --json "$WORK/jobs$jobs.json" >"$WORK/jobs.out" 2>&1 || { cat "$WORK/jobs.out"; fail "predict --jobs $jobs failed"; }
done
grep -q "6 configuration(s), 5 seed(s) each, on 3 thread(s)" "$WORK/jobs.out" || { cat "$WORK/jobs.out"; fail "no progress line"; }
cmp -s "$WORK/jobs1.json" "$WORK/jobs3.json" || fail "predict --jobs 3 differs from --jobs 1"
timeout 120 "$PSBED" predict --profile "$WORK/profile.json" --workers 2 --jobs -1 >"$WORK/bad.out" 2>&1 &&
  fail "a negative --jobs was accepted"
grep -q "jobs" "$WORK/bad.out" || { cat "$WORK/bad.out"; fail "the --jobs error does not name the option"; }
timeout 120 "$PSBED" predict --profile "$WORK/profile.json" --workers 2,0 >"$WORK/bad.out" 2>&1 &&
  fail "--workers 0 was accepted"
grep -q "^psbed predict: --workers: Value 0 not in range 1" "$WORK/bad.out" || { cat "$WORK/bad.out"; fail "the --workers error does not name the option"; }
# A validate that fails leaves no empty report folder behind.
timeout 120 "$PSBED" validate --profile "$WORK/profile.json" "$WORK/nosuch" --out "$WORK/noreport" >"$WORK/bad.out" 2>&1 &&
  fail "validate of a missing run folder succeeded"
[ ! -e "$WORK/noreport" ] || fail "a failed validate left its --out folder behind"
# ... and never removes a folder that was there, however --out spells it.
mkdir -p "$WORK/keep" && echo kept >"$WORK/keep/file"
timeout 120 "$PSBED" validate --profile "$WORK/profile.json" "$WORK/nosuch" --out "$WORK/newdir/../keep" >"$WORK/bad.out" 2>&1 &&
  fail "validate of a missing run folder succeeded"
[ -f "$WORK/keep/file" ] || fail "a failed validate removed the folder its --out named under another spelling"
# A value given twice would be simulated and printed twice.
timeout 120 "$PSBED" predict --profile "$WORK/profile.json" --workers 2,2 >"$WORK/bad.out" 2>&1 &&
  fail "--workers 2,2 was accepted"
grep -q "^psbed: error: --workers gives 2 twice$" "$WORK/bad.out" || { cat "$WORK/bad.out"; fail "no word on the repeated worker count"; }
timeout 120 "$PSBED" launch --servers 1 --workers 2 --model "$MODEL" --data synthetic --steps 60 --batch 16 \
  --mode bsp --bandwidth 100mbit --compute "replay:$WORK/profile.json" --out "$WORK/pair" >"$WORK/pair.out" 2>&1 ||
  { tail -20 "$WORK/pair.out"; fail "the two-worker run failed"; }
timeout 120 "$PSBED" validate --profile "$WORK/profile.json" "$WORK/pair" --out "$WORK/report" >"$WORK/validate.out" 2>&1 ||
  { cat "$WORK/validate.out"; fail "validate failed"; }
python3 - "$WORK/report/validation.json" "$predicted" <<'PY' || fail "validation of the custom model"
import json, math, sys
v = json.load(open(sys.argv[1]))
assert len(v["runs"]) == 1, v["runs"]
r = v["runs"][0]
assert r["workers"] == 2 and r["policy"] == "wfbp" and r["mode"] == "bsp", r
assert r["measured_images_per_sec"] > 0 and r["predicted_images_per_sec"] > 0, r
assert math.isfinite(r["error_pct"]), r
# validate predicts the run for its own length; predict ran the same configuration.
assert abs(r["predicted_images_per_sec"] / float(sys.argv[2]) - 1) < 0.25, (r, sys.argv[2])
print(f"blocks, 2 workers: measured {r['measured_images_per_sec']:.0f} images/s, "
      f"predicted {r['predicted_images_per_sec']:.0f} ({r['error_pct']:+.1f}%)")
PY
# Two workers computing for real, as the profiled run did: validate sets their host CPU per
# worker-step beside what the simulation books for their configuration and predicts the run
# again at it. The profiled run itself, validated beside them, measured about what is booked.
timeout 120 "$PSBED" launch --servers 1 --workers 2 --model "$MODEL" --data synthetic --steps 60 --batch 16 \
  --threads 1 --mode bsp --bandwidth 100mbit --out "$WORK/real-pair" >"$WORK/real-pair.out" 2>&1 ||
  { tail -20 "$WORK/real-pair.out"; fail "the real-compute two-worker run failed"; }
timeout 120 "$PSBED" validate --profile "$WORK/profile.json" "$WORK/single" "$WORK/real-pair" \
  --out "$WORK/report-real" >"$WORK/validate-real.out" 2>&1 ||
  { cat "$WORK/validate-real.out"; fail "validate of the real-compute runs failed"; }
grep -q "^The host's CPU per worker-step" "$WORK/report-real/validation.md" ||
  { cat "$WORK/report-real/validation.md"; fail "validation.md does not give the host's CPU per step"; }
python3 - "$WORK/report-real/validation.json" "$WORK/profile.json" <<'PY' || fail "the host CPU of the real-compute runs"
import json, math, sys
v = json.load(open(sys.argv[1]))
profiled = json.load(open(sys.argv[2]))["source"]["host_cpu_per_step_ms"]
assert profiled > 0 and v["at_measured_host_cpu"]["profiled_per_step_ms"] == profiled, v["at_measured_host_cpu"]
assert v["at_measured_host_cpu"]["configurations"] == 2, v["at_measured_host_cpu"]
rows = {r["workers"]: r for r in v["runs"]}
for workers, r in sorted(rows.items()):
    h = r["host_cpu"]
    assert h["per_step_ms"] > 0 and h["simulated_per_step_ms"] > 0, h
    assert math.isclose(h["ratio"], h["per_step_ms"] / h["simulated_per_step_ms"]), h
    assert 0 < h["busy_cores"] <= 1.1 * h["cores"] and h["cores"] >= 1, h
    assert h["predicted_images_per_sec"] > 0 and math.isfinite(h["error_pct"]), h
    print(f"blocks, {workers} worker(s), real compute: {h['per_step_ms']:.2f} ms of host CPU a step "
          f"against {h['simulated_per_step_ms']:.2f} simulated, {h['busy_cores']:.2f} of {h['cores']} "
          f"cores busy; error {r['error_pct']:+.1f}%, at the measured CPU {h['error_pct']:+.1f}%")
# The profiled run measured its own CPU: the simulation of it books about as much.
assert 0.8 < rows[1]["host_cpu"]["ratio"] < 1.25, rows[1]["host_cpu"]
assert abs(rows[1]["host_cpu"]["per_step_ms"] / profiled - 1) < 0.05, (rows[1]["host_cpu"], profiled)
PY
# The real pair crowds a 2-core host (2 workers + 1 shard): profile --contention-run takes the
# extra CPU it spent a worker-step as the host's contention, and validated with that profile
# the pair books what it measured. On a host with more cores the pair does not crowd it, and is
# refused as a contention run.
timeout 120 "$PSBED" profile "$WORK/single" --contention-run "$WORK/pair" -o "$WORK/bad.json" >"$WORK/bad.out" 2>&1 &&
  fail "a replayed run was taken as a contention run"
grep -q "contention-run $WORK/pair: its compute was replayed" "$WORK/bad.out" || { cat "$WORK/bad.out"; fail "no reason for refusing the replayed run"; }
cores=$(json "$WORK/profile.json" 's["host"]["cpus"]')
# (--copy-ns-per-byte: the profile extracted alike, so its costs are profile.json's.)
timeout 120 "$PSBED" profile "$WORK/single" --copy-ns-per-byte "$copy" --contention-run "$WORK/real-pair" \
  -o "$WORK/crowded.json" >"$WORK/crowded.out" 2>&1 && crowded=1 || crowded=0
if [ "$cores" -ge 3 ]; then
  [ "$crowded" = 0 ] && grep -q "do not crowd the host" "$WORK/crowded.out" ||
    { cat "$WORK/crowded.out"; fail "a pair on $cores cores was taken as a crowded run"; }
  echo "contention: $cores cores, the pair does not crowd them (refused, as it should be)"
else
  [ "$crowded" = 1 ] || { cat "$WORK/crowded.out"; fail "profile --contention-run failed"; }
  timeout 120 "$PSBED" validate --profile "$WORK/crowded.json" "$WORK/real-pair" --out "$WORK/report-crowded" \
    >"$WORK/validate-crowded.out" 2>&1 || { cat "$WORK/validate-crowded.out"; fail "validate with the contention failed"; }
  python3 - "$WORK/crowded.json" "$WORK/report-real/validation.json" "$WORK/report-crowded/validation.json" "$cores" <<'PY' ||
import json, sys
p = json.load(open(sys.argv[1]))
before = {r["workers"]: r for r in json.load(open(sys.argv[2]))["runs"]}[2]["host_cpu"]
after = json.load(open(sys.argv[3]))["runs"][0]["host_cpu"]
k, c, cores = p["host"].get("contention", 0), p["source"]["contention_run"], int(sys.argv[4])
over = min(1, (3 - cores) / cores)
assert c["workers"] == 2 and c["servers"] == 1 and c["cores"] == cores, c
assert abs(c["ratio"] / before["ratio"] - 1) < 1e-3, (c, before)
assert abs(k - max(0, (c["ratio"] - 1) / over)) < 1e-9, (k, c)
# Booked x (1 + k x over) = the measured CPU where the pair spent more than booked.
assert abs(after["ratio"] - min(1, before["ratio"]) ) < 0.02 if before["ratio"] < 1 else abs(after["ratio"] - 1) < 0.02, (before, after)
print(f"contention {k:.2f} from the pair (x{c['ratio']:.2f} the booked CPU); validated with it x{after['ratio']:.2f}")
PY
    fail "the contention the pair measured"
fi
echo "PASS"
