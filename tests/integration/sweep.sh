#!/usr/bin/env bash
# `psbed sweep`: a 2 x 2 grid (workers x policies) of real launches gives a run folder per point,
# results.csv / results.json with one finished row each, and a plot when matplotlib is there;
# --resume keeps finished points; a typo in the grid is refused before anything runs.
source "$(dirname "$0")/lib.sh"
need_data
"$PSBED" sweep --model lenet5 --workers 1,2 --policy wfbp,fastest --steps 20 --out "$WORK/bad" >"$WORK/bad.out" 2>&1 &&
  fail "a grid with an unknown policy was accepted"
grep -q "unknown policy 'fastest'" "$WORK/bad.out" || fail "no reason given for the bad grid"
[ ! -e "$WORK/bad/results.csv" ] || fail "runs started before the grid was checked"

timeout 400 "$PSBED" sweep --model lenet5 --data mnist --workers 1,2 --policy wfbp,p3 --mode async --steps 60 \
  --batch 32 --out "$WORK/sw" >"$WORK/sw.out" 2>&1 || { tail -20 "$WORK/sw.out"; fail "the sweep failed"; }
grep -q "\[4/4\]" "$WORK/sw.out" || fail "no progress lines"
[ "$(tail -n +2 "$WORK/sw/results.csv" | wc -l)" = 4 ] || fail "expected 4 rows in results.csv"
python3 - "$WORK/sw" <<'PY' || fail "results do not match the run folders"
import csv, json, os, sys
out = sys.argv[1]
rows = list(csv.DictReader(open(os.path.join(out, "results.csv"))))
assert {(r["policy"], r["workers"]) for r in rows} == {("wfbp", "1"), ("wfbp", "2"), ("p3", "1"), ("p3", "2")}
for r in rows:
    s = json.load(open(os.path.join(out, r["run"], "summary.json")))
    assert r["ok"] == "1" and s["ok"], r
    assert s["policy"] == r["policy"] and s["workers"] == int(r["workers"]) and s["mode"] == "async"
    assert abs(float(r["images_per_sec"]) - s["images_per_sec"]) <= 1e-3 * s["images_per_sec"] + 0.01, r
    assert float(r["images_per_sec"]) > 0
assert len(json.load(open(os.path.join(out, "results.json")))["runs"]) == 4
PY
grep -q "^| 2 | [0-9.]* | [0-9.]* |$" "$WORK/sw/results.md" || fail "results.md lacks the 2-worker row"
if /usr/bin/python3 -c "import matplotlib" 2>/dev/null; then
  [ -s "$WORK/sw/sweep.png" ] || fail "matplotlib is installed but there is no sweep.png"
fi
"$PSBED" sweep --model lenet5 --data mnist --workers 1,2 --policy wfbp,p3 --mode async --steps 60 --batch 32 \
  --out "$WORK/sw" --resume >"$WORK/resume.out" 2>&1 || fail "resume failed"
[ "$(grep -c "kept (finished earlier)" "$WORK/resume.out")" = 4 ] || fail "--resume reran finished points"
echo "PASS"
