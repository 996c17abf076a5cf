#!/usr/bin/env bash
# `psbed optimize` ranks its leaders by the median of several seeds: the configurations that lead
# the one-draw search are simulated again with --confirm-seeds seeds, and the figure listed for
# the first is the one `psbed predict` gives that configuration with as many seeds.
# --confirm-seeds 1 keeps the search's single draw.
source "$(dirname "$0")/lib.sh"
PROFILE="$SRC/tests/fixtures/predictor/regression/profile.json"
COMMON=(--max-nodes 6 --max-servers 2 --mode async --bandwidth 100mbit --steps 30 --top 3)

# predicted CONFIG_JSON SEEDS: psbed predict's images/s for one ranked configuration.
predicted() {
  local args
  args=$(python3 -c '
import json, sys
r = json.loads(sys.argv[1])
a = ["--workers", r["workers"], "--servers", r["servers"], "--policy", r["policy"], "--mode", r["mode"],
     "--slice-params", r["slice_params"], "--partition-params", r["partition_params"]]
if r["credit_bytes"] >= 0: a += ["--credit", r["credit_bytes"]]
print(" ".join(str(x) for x in a))' "$1")
  # shellcheck disable=SC2086
  timeout 120 "$PSBED" predict --profile "$PROFILE" $args --bandwidth 100mbit --steps 30 --seeds "$2" \
    --json "$WORK/p.json" >/dev/null 2>"$WORK/p.err" || { cat "$WORK/p.err"; fail "predict $args"; }
  json "$WORK/p.json" 's[0]["images_per_sec"]'
}

same() {  # same A B: two figures equal but for rounding
  python3 -c "import sys; a, b = float(sys.argv[1]), float(sys.argv[2]); sys.exit(0 if abs(a - b) <= 1e-9 * b else 1)" "$1" "$2"
}

timeout 300 "$PSBED" optimize --profile "$PROFILE" "${COMMON[@]}" --json "$WORK/rank.json" \
  >"$WORK/rank.out" 2>"$WORK/rank.err" || { cat "$WORK/rank.err"; fail "optimize failed"; }
grep -q "optimize: the leaders again: [0-9]* configuration(s), 5 seed(s) each" "$WORK/rank.err" ||
  { cat "$WORK/rank.err"; fail "no second pass over the leaders announced"; }
grep -q "leading ones again with 5 seeds: images/s is their median" "$WORK/rank.out" ||
  { cat "$WORK/rank.out"; fail "the table does not say its figures are medians"; }
python3 - "$WORK/rank.json" <<'PY' || fail "the ranking's JSON does not hold the confirmed leaders"
import json, sys
s = json.load(open(sys.argv[1]))
assert s["seeds"] == 1 and s["confirm_seeds"] == 5, s
# The leaders: the first 2 x 3 of each ranking, some in both.
assert 6 <= s["confirmed"] <= 12 and s["confirmed"] < s["configurations"], s
for key in ("by_images_per_sec", "by_images_per_sec_per_node"):
    rows = s[key]
    assert len(rows) == 3, rows
    for r in rows:
        assert r["seeds"] == 5, r
        assert r["seeds_min_images_per_sec"] <= r["images_per_sec"] <= r["seeds_max_images_per_sec"], r
    figure = "images_per_sec" if key == "by_images_per_sec" else "images_per_sec_per_node"
    assert all(a[figure] >= b[figure] for a, b in zip(rows, rows[1:])), rows
# The search's context, and every configuration simulated, each once: configurations that simulate
# alike (credits past the model's bytes) are one row that names the others.
c = s["search"]
assert c["profile"].endswith("profile.json") and c["model"] == "lenet5" and c["mode"] == "async", c
assert c["bandwidth_bytes_per_sec"] == 12.5e6 and c["link_model"] == "bucket" and c["steps"] == 30, c
assert c["seeds"] == 1 and c["confirm_seeds"] == 5, c
assert len(s["simulated"]) == s["configurations"] < s["configurations_searched"], s
keys = [(r["workers"], r["servers"], r["description"]) for r in s["simulated"]]
assert len(keys) == len(set(keys)), keys
assert sum(1 for r in s["simulated"] if "confirmed" in r) == s["confirmed"], s
for r in s["simulated"]:
    if r["policy"] == "p3":
        assert len(r["same"]) == 2 and "(same: credit" in r["description"], r
PY
grep -q "act alike and are listed as one" "$WORK/rank.out" || { cat "$WORK/rank.out"; fail "no word on the configurations that act alike"; }
# A setting the policy does not use is not in its name; --credit default searches no credit.
timeout 300 "$PSBED" optimize --profile "$PROFILE" "${COMMON[@]}" --policy bulk,p3 --credit default --confirm-seeds 1 \
  --json "$WORK/default.json" >"$WORK/default.out" 2>&1 || { cat "$WORK/default.out"; fail "optimize --credit default"; }
json "$WORK/default.json" 'sys.exit(0 if all(r["credit_bytes"] == -1 for r in s["simulated"]) and s["configurations_searched"] == s["configurations"] else 1)' ||
  fail "--credit default still searched credits"
if grep -E "^[0-9].* bulk .*credit" "$WORK/default.out"; then fail "bulk is named with a credit it does not use"; fi
first=$(json "$WORK/rank.json" 'json.dumps(s["by_images_per_sec"][0])')
ranked=$(json "$WORK/rank.json" 's["by_images_per_sec"][0]["images_per_sec"]')
median=$(predicted "$first" 5)
same "$ranked" "$median" || fail "optimize ranks the first at $ranked images/s, predict --seeds 5 gives $median"

timeout 300 "$PSBED" optimize --profile "$PROFILE" "${COMMON[@]}" --confirm-seeds 1 --json "$WORK/one.json" \
  >"$WORK/one.out" 2>"$WORK/one.err" || { cat "$WORK/one.err"; fail "optimize --confirm-seeds 1 failed"; }
grep -q "leaders again" "$WORK/one.err" && fail "--confirm-seeds 1 still simulated the leaders again"
json "$WORK/one.json" 'sys.exit(0 if s["confirmed"] == 0 and all(r["seeds"] == 1 for r in s["by_images_per_sec"]) else 1)' ||
  fail "--confirm-seeds 1: the ranking is not the search's single draw"
first=$(json "$WORK/one.json" 'json.dumps(s["by_images_per_sec"][0])')
ranked=$(json "$WORK/one.json" 's["by_images_per_sec"][0]["images_per_sec"]')
single=$(predicted "$first" 1)
same "$ranked" "$single" || fail "--confirm-seeds 1 ranks the first at $ranked images/s, predict --seeds 1 gives $single"
echo "PASS"
