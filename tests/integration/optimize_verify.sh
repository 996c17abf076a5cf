#!/usr/bin/env bash
# `psbed optimize --verify`: ranks configurations from the recorded lenet5 profile, launches the
# first by images/s as real processes (compute replay of the profile), and reports measured beside
# predicted, in the terminal and in RUN/verify.json; the run is the configuration the ranking put
# first. Then the settings check: p3's slices launched beside the one recommended, the exit status
# saying whether it measured within 3% of the best. A bad --verify-steps or --verify-repeat is
# refused before anything is simulated or launched.
source "$(dirname "$0")/lib.sh"
PROFILE="$SRC/tests/fixtures/predictor/regression/profile.json"

timeout 60 "$PSBED" optimize --profile "$PROFILE" --max-nodes 3 --verify --verify-steps 0 >"$WORK/bad.out" 2>&1 &&
  fail "--verify-steps 0 was accepted"
grep -q "verify-steps must be at least 1, got 0" "$WORK/bad.out" || { cat "$WORK/bad.out"; fail "no reason given"; }
grep -q "simulated\|configuration(s), .* seed" "$WORK/bad.out" && fail "simulated before refusing the bad option"
timeout 60 "$PSBED" optimize --profile "$PROFILE" --max-nodes 3 --verify --verify-repeat -1 >"$WORK/bad.out" 2>&1 &&
  fail "--verify-repeat -1 was accepted"
grep -q "verify-repeat must be 0 (no settings check) or more, got -1" "$WORK/bad.out" || { cat "$WORK/bad.out"; fail "no reason given for --verify-repeat"; }
# So is a --verify-out that holds a run already.
mkdir -p "$WORK/held" && echo '{}' >"$WORK/held/summary.json"
timeout 60 "$PSBED" optimize --profile "$PROFILE" --max-nodes 3 --verify --verify-out "$WORK/held" >"$WORK/bad.out" 2>&1 &&
  fail "a --verify-out holding a run was accepted"
grep -q "verify-out $WORK/held holds a run already" "$WORK/bad.out" || { cat "$WORK/bad.out"; fail "no reason given for --verify-out"; }
grep -q "simulated\|configuration(s), .* seed" "$WORK/bad.out" && fail "simulated before refusing --verify-out"

# A given slice and credit fix those dimensions: every p3 configuration takes them (without
# them the search tries 3 slices x 3 credits per worker count).
timeout 120 "$PSBED" optimize --profile "$PROFILE" --max-nodes 3 --max-servers 1 --policy p3 --slice-params 5000 \
  --credit 2MiB --steps 10 --top 5 --json "$WORK/fixed.json" >"$WORK/fixed.out" 2>&1 || { cat "$WORK/fixed.out"; fail "optimize with a fixed slice failed"; }
grep -q "optimize: 2 configuration(s)" "$WORK/fixed.out" || { cat "$WORK/fixed.out"; fail "a fixed slice and credit still searched"; }
json "$WORK/fixed.json" 'sys.exit(0 if s["by_images_per_sec"] and all(r["slice_params"] == 5000 and r["credit_bytes"] == 2097152 for r in s["by_images_per_sec"]) else 1)' ||
  { cat "$WORK/fixed.json"; fail "the ranking holds another slice or credit than the ones given"; }
timeout 60 "$PSBED" optimize --profile "$PROFILE" --max-servers 0 >"$WORK/zero.out" 2>&1 && fail "--max-servers 0 was accepted"
grep -q "max-servers" "$WORK/zero.out" || { cat "$WORK/zero.out"; fail "--max-servers 0 refused without naming it"; }

timeout 300 "$PSBED" optimize --profile "$PROFILE" --max-nodes 3 --policy wfbp,bulk --mode async \
  --bandwidth 100mbit --latency 200us --steps 20 --top 3 --json "$WORK/rank.json" \
  --verify --verify-steps 40 --verify-data synthetic --verify-out "$WORK/run" >"$WORK/out" 2>&1 ||
  { tail -30 "$WORK/out"; fail "optimize --verify failed"; }
grep -q "optimize: [0-9]* configuration(s), 1 seed(s) each, on [0-9]* thread(s)" "$WORK/out" ||
  fail "no simulation progress printed"
grep -q "measured .* images/s" "$WORK/out" || fail "no measured figure printed"
grep -q "predicted .* images/s" "$WORK/out" || fail "no predicted figure printed"
python3 - "$WORK/rank.json" "$WORK/run" <<'PY' || fail "verify.json does not match the ranking and the run"
import json, os, sys
rank = json.load(open(sys.argv[1]))["by_images_per_sec"][0]
run = sys.argv[2]
v = json.load(open(os.path.join(run, "verify.json")))
s = json.load(open(os.path.join(run, "summary.json")))
assert s["ok"], s.get("failed_nodes")
for k in ("workers", "servers", "policy", "mode"):
    assert v[k] == rank[k] == s[k], (k, v[k], rank[k], s[k])
assert v["workers"] + v["servers"] <= 3
assert v["compute"].startswith("replay:") and s["compute"] == v["compute"]
assert v["bandwidth"] == "100mbit" and v["latency"] == "200us", (v["bandwidth"], v["latency"])
m, p = v["measured_images_per_sec"], v["predicted_images_per_sec"]
assert abs(m - s["images_per_sec"]) <= 1e-6 * m, (m, s["images_per_sec"])
assert m > 0 and p > 0
assert abs(v["error_pct"] - 100 * (p - m) / m) < 1e-6, v
assert abs(v["optimize_images_per_sec"] - rank["images_per_sec"]) < 1e-6 * rank["images_per_sec"]
PY
grep -q "verify settings: no ranked configuration's policy has settings" "$WORK/out" ||
  fail "wfbp and bulk have no settings, yet the check did not say so"

# The settings check: p3 on 1 worker and 1 shard, the credit fixed, its three slices (10k, 40k,
# whole parts) one run each. Its status is 0 exactly when settings.json says it passed. Its runs
# are the configuration simulated: a straggler and a start stagger reach them too.
rc=0
timeout 300 "$PSBED" optimize --profile "$PROFILE" --max-nodes 2 --policy p3 --credit 1MiB --mode bsp \
  --bandwidth 100mbit --steps 10 --straggler-ms 1 --start-stagger-ms 3 \
  --verify --verify-steps 30 --verify-data synthetic \
  --verify-repeat 1 --verify-out "$WORK/p3" >"$WORK/p3.out" 2>&1 || rc=$?
[ -f "$WORK/p3-settings/settings.json" ] || { tail -30 "$WORK/p3.out"; fail "no settings.json (status $rc)"; }
grep -q "verify settings: medians of 1 run(s) each" "$WORK/p3.out" || fail "no table of the settings printed"
python3 - "$WORK/p3-settings/settings.json" "$rc" <<'PY' || fail "settings.json does not hold the check"
import json, os, sys
s = json.load(open(sys.argv[1]))
rows = s["settings"]
assert s["policy"] == "p3" and s["workers"] == 1 and s["servers"] == 1, s
assert len(rows) == 3 and rows[0]["recommended"] and not any(r["recommended"] for r in rows[1:]), rows
assert sorted(r["slice_params"] for r in rows) == [10000, 40000, 160000], rows
assert len(s["runs"]) == 3 and all(os.path.exists(r["run"] + "/summary.json") for r in s["runs"])
best = max(r["measured_images_per_sec"] for r in rows)
below = 100 * (best - rows[0]["measured_images_per_sec"]) / best
assert abs(s["recommended_below_best_pct"] - below) < 1e-6, (s, below)
assert s["pass"] == (below <= 3.0), s
assert (int(sys.argv[2]) == 0) == s["pass"], ("exit status", sys.argv[2], s["pass"])
for r in s["runs"]:  # each settings run's own output in its folder, its launch as simulated
    log = open(os.path.join(r["run"], "launch.log")).read()
    assert "cluster complete" in log and "summary written" in log, (r["run"], log[-2000:])
    launch = json.load(open(os.path.join(r["run"], "summary.json")))["launch"]
    assert launch["straggler_ms"] == 1 and launch["start_stagger_ms"] == 3, launch
PY
# The terminal shows the first launch's output and one line per settings run, not their output.
[ "$(grep -c "cluster complete" "$WORK/p3.out")" = 1 ] || { cat "$WORK/p3.out"; fail "the settings runs' output reached the terminal"; }
[ "$(grep -c "^verify settings \[[0-9]/3\] " "$WORK/p3.out")" = 3 ] || { cat "$WORK/p3.out"; fail "no line per settings run"; }
echo "PASS"
