#!/usr/bin/env bash
# What the predictor commands leave behind matches what they were asked: predict --trace-out
# refuses a folder that holds traces already (old node files beside new ones), and lays one
# configuration's traces in the folder, several in a subfolder each; validate --out leaves no
# plot of an earlier report.
source "$(dirname "$0")/lib.sh"
FIXTURE="$SRC/tests/fixtures/predictor/regression"
PROFILE="$FIXTURE/profile.json"
RUN="$FIXTURE/runs/lenet5-2w-bsp-bulk-100mbit"
predict() { timeout 120 "$PSBED" predict --profile "$PROFILE" --policy wfbp --steps 10 --seeds 1 "$@"; }

# Several configurations: a subfolder each, named in the JSON rows.
predict --workers 2 --servers 1,2 --trace-out "$WORK/traces" --json "$WORK/p.json" >"$WORK/p.out" 2>&1 ||
  { cat "$WORK/p.out"; fail "predict --trace-out"; }
for d in 2w1s-wfbp-bsp 2w2s-wfbp-bsp; do
  [ -f "$WORK/traces/$d/worker-0.trace.json" ] || { find "$WORK/traces"; fail "no traces in $d/"; }
done
json "$WORK/p.json" 'sys.exit(0 if [r["traces"].split("/")[-2:] for r in s] == [["traces", "2w1s-wfbp-bsp"], ["traces", "2w2s-wfbp-bsp"]] else 1)' ||
  fail "the JSON rows do not name their trace folders"
# Into the same folder again: refused, nothing written over.
before=$(find "$WORK/traces" -type f | sort | xargs md5sum)
if predict --workers 2 --servers 1 --trace-out "$WORK/traces" >"$WORK/again.out" 2>&1; then fail "predict wrote traces beside old ones"; fi
grep -qF -- "--trace-out $WORK/traces holds traces already (7 *.trace.json)" "$WORK/again.out" ||
  { cat "$WORK/again.out"; fail "no word on the traces already there"; }
[ "$(grep -c . "$WORK/again.out")" = 1 ] || { cat "$WORK/again.out"; fail "more than one line"; }
[ "$before" = "$(find "$WORK/traces" -type f | sort | xargs md5sum)" ] || fail "the refused predict changed the folder"
# One configuration: straight into the folder.
predict --workers 2 --servers 1 --trace-out "$WORK/one" >"$WORK/one.out" 2>&1 || { cat "$WORK/one.out"; fail "predict into a new folder"; }
[ "$(ls "$WORK/one")" = "$(printf 'server-0.trace.json\nworker-0.trace.json\nworker-1.trace.json')" ] ||
  { ls "$WORK/one"; fail "one configuration's traces are not straight in the folder"; }
echo "predict --trace-out: a subfolder a configuration, one straight in, old traces refused"

# validate --out over an earlier report: its validation.png goes when no new plot is made.
mkdir -p "$WORK/report" && echo "old" >"$WORK/report/validation.png"
timeout 120 "$PSBED" validate --profile "$PROFILE" "$RUN" --steps 10 --seeds 1 --python /bin/false \
  --out "$WORK/report" >"$WORK/v.out" 2>&1 || { cat "$WORK/v.out"; fail "validate"; }
[ ! -e "$WORK/report/validation.png" ] || fail "validate left an earlier report's plot"
[ -s "$WORK/report/validation.json" ] || fail "validate wrote no validation.json"
echo "validate --out: no stale plot"
# The fast mode: above 64 workers (auto) on separate machines, groups; said below the table and
# in the JSON, with its check; exact where the host's cores are modelled (the host profile's CPU
# costs on its 2 cores).
predict --workers 8,70 --host-cpus 0 --groups 4 --json "$WORK/fast.json" >"$WORK/fast.out" 2>&1 ||
  { cat "$WORK/fast.out"; fail "predict --fidelity auto"; }
json "$WORK/fast.json" 'sys.exit(0 if [(r["fidelity"], r["simulated_workers"], "fast_check_pct" in r) for r in s] == [("exact", 8, False), ("fast", 4, True)] else 1)' ||
  { cat "$WORK/fast.json"; fail "the JSON rows do not say how they were simulated"; }
grep -q '^fast: 1 row(s) simulated as 4 groups of identical workers' "$WORK/fast.out" ||
  { cat "$WORK/fast.out"; fail "predict did not say which rows the fast mode grouped"; }
timeout 120 "$PSBED" predict --profile "$SRC/docs/grid/lenet5/profile-host-lenet5.json" --policy wfbp \
  --steps 5 --seeds 1 --workers 70 --fidelity fast --json "$WORK/cores.json" >"$WORK/cores.out" 2>&1 ||
  { cat "$WORK/cores.out"; fail "predict --fidelity fast with the host's cores"; }
json "$WORK/cores.json" 'sys.exit(0 if s[0]["simulated_workers"] == 70 else 1)' ||
  fail "the fast mode grouped workers that share the host's cores"
if grep -q '^fast:' "$WORK/cores.out"; then cat "$WORK/cores.out"; fail "a row simulated worker by worker was called fast"; fi
echo "predict --fidelity: groups above 64 workers, said in the table and the JSON"
# bench predict's rows say what they simulated.
timeout 120 "$PSBED" bench predict --workers 2 --steps 20 --slice-params 20000,40000 --link-model fair \
  --bandwidth 100mbit --json "$WORK/bench.json" >"$WORK/bench.out" 2>&1 || { cat "$WORK/bench.out"; fail "bench predict"; }
timeout 120 "$PSBED" bench predict --profile "$PROFILE" --workers 2 --steps 20 --policy bytescheduler \
  --json "$WORK/bench-profile.json" >"$WORK/bench.out" 2>&1 || { cat "$WORK/bench.out"; fail "bench predict --profile"; }
python3 - "$WORK/bench.json" "$WORK/bench-profile.json" "$PROFILE" <<'PY' || fail "bench predict's rows do not say what they simulated"
import json, sys
synthetic, measured = (json.load(open(p)) for p in sys.argv[1:3])
# Each slice size worker by worker, then in the fast mode's groups (--fidelity both).
assert [(r["slice_params"], r["fidelity"]) for r in synthetic] == \
    [(20000, "exact"), (20000, "fast"), (40000, "exact"), (40000, "fast")], synthetic
for r in synthetic:
    assert (r["model"], r["policy"], r["link_model"], r["profile"]) == ("vgg-mini", "p3", "fair", None), r
    assert r["bandwidth_bytes_per_sec"] == 12.5e6 and r["bandwidth"] == "100.00 Mbit/s", r
for r in measured:
    assert (r["model"], r["policy"], r["link_model"], r["profile"]) == ("lenet5", "bytescheduler", "bucket", sys.argv[3]), r
    assert r["bandwidth_bytes_per_sec"] == 125e6, r
PY
echo "bench predict: each row names its model, policy, link and profile"
echo "PASS"
