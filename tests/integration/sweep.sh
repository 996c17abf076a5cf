#!/usr/bin/env bash
# `psbed sweep`: a 2 x 2 grid (workers x policies) of real launches gives a run folder per point,
# results.csv / results.json with one finished row each, and a plot when matplotlib is there;
# --resume keeps finished points, --repeat adds runs of a point beside them; a typo in the grid is
# refused before anything runs.
source "$(dirname "$0")/lib.sh"
need_data
timeout 60 "$PSBED" sweep --model lenet5 --workers 1,2 --policy wfbp,fastest --steps 20 --out "$WORK/bad" >"$WORK/bad.out" 2>&1 &&
  fail "a grid with an unknown policy was accepted"
grep -q "unknown policy 'fastest'" "$WORK/bad.out" || fail "no reason given for the bad grid"
[ ! -e "$WORK/bad/results.csv" ] || fail "runs started before the grid was checked"
# So is a shard count beyond the model's parts, whichever point asks for it.
timeout 60 "$PSBED" sweep --model lenet5 --workers 1 --servers 1,16 --policy wfbp --steps 20 --out "$WORK/bad2" >"$WORK/bad.out" 2>&1 &&
  fail "a grid with 16 shards of lenet5's 10 parts was accepted"
grep -q -- "--servers 16: lenet5 has 10 parts" "$WORK/bad.out" || { cat "$WORK/bad.out"; fail "no reason given for 16 shards"; }
[ ! -e "$WORK/bad2/results.csv" ] || fail "runs started before the shard counts were checked"
# An --out that cannot be a folder is named; so is a GPU sweep where there is no GPU, before any
# point runs.
touch "$WORK/afile"
timeout 60 "$PSBED" sweep --model lenet5 --workers 1 --policy wfbp --steps 20 --out "$WORK/afile" >"$WORK/bad.out" 2>&1 &&
  fail "a file as --out was accepted"
grep -q -- "--out: cannot create the folder '$WORK/afile'" "$WORK/bad.out" || { cat "$WORK/bad.out"; fail "no reason for refusing a file as --out"; }
if ! grep -q . <(nvidia-smi -L 2>/dev/null); then
  rc=0; timeout 60 "$PSBED" sweep --model lenet5 --workers 1,2 --policy wfbp --steps 20 --device gpu --out "$WORK/gpu" \
    >"$WORK/bad.out" 2>&1 || rc=$?
  [ "$rc" = 2 ] || { cat "$WORK/bad.out"; fail "a GPU sweep without a GPU exited $rc, not 2"; }
  grep -q "no CUDA device available" "$WORK/bad.out" || { cat "$WORK/bad.out"; fail "no reason for refusing a GPU sweep"; }
  [ "$(grep -c "no CUDA device" "$WORK/bad.out")" = 1 ] && [ ! -e "$WORK/gpu" ] || fail "the GPU sweep was tried point by point"
fi
# 0 and unshaped are one link: given both, one point would run twice under two labels.
timeout 60 "$PSBED" sweep --model lenet5 --workers 1 --bandwidth 0,unshaped --policy wfbp --steps 20 --out "$WORK/bad3" \
  >"$WORK/bad.out" 2>&1 && fail "--bandwidth 0,unshaped was accepted"
grep -q "gives one rate twice (0 and unshaped are one" "$WORK/bad.out" || { cat "$WORK/bad.out"; fail "no reason for refusing 0,unshaped"; }

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
# The plotting script is the binary's own, written beside the results: no source tree needed.
cmp -s "$WORK/sw/plot_sweep.py" "$SRC/cluster/plot_sweep.py" || fail "no copy of cluster/plot_sweep.py beside the results"
if /usr/bin/python3 -c "import matplotlib" 2>/dev/null; then
  [ -s "$WORK/sw/sweep.png" ] || fail "matplotlib is installed but there is no sweep.png"
else  # one line that says what to install, no traceback
  grep -q "no plot: matplotlib is not installed" "$WORK/sw.out" || { tail -5 "$WORK/sw.out"; fail "no word on the missing matplotlib"; }
  if grep -q "Traceback" "$WORK/sw.out"; then fail "the sweep printed a traceback for the missing matplotlib"; fi
  [ "$(grep -c "matplotlib" "$WORK/sw.out")" = 1 ] || { grep matplotlib "$WORK/sw.out"; fail "more than one line on the missing matplotlib"; }
fi
# The same folder again: refused without --resume (results.csv would be lost), and with
# --resume under other settings (the kept runs would be labelled with steps they did not run).
timeout 60 "$PSBED" sweep --model lenet5 --data mnist --workers 1,2 --policy wfbp,p3 --mode async --steps 60 --batch 32 \
  --out "$WORK/sw" >"$WORK/again.out" 2>&1 && fail "a second sweep into the same folder was accepted"
grep -q "holds a sweep already" "$WORK/again.out" || { cat "$WORK/again.out"; fail "no reason for refusing the folder"; }
timeout 60 "$PSBED" sweep --model lenet5 --data mnist --workers 1,2 --policy wfbp,p3 --mode async --steps 40 --batch 32 \
  --out "$WORK/sw" --resume >"$WORK/other.out" 2>&1 && fail "--resume with other steps was accepted"
grep -q "ran with 60 steps, not 40" "$WORK/other.out" || { cat "$WORK/other.out"; fail "no reason for refusing other settings"; }
# So do the finished runs outside this call's grid, which stay in its results: a 4-worker grid at
# 40 steps would put its rows beside 60-step ones.
timeout 60 "$PSBED" sweep --model lenet5 --data mnist --workers 4 --policy wfbp --mode async --steps 40 --batch 32 \
  --out "$WORK/sw" --resume >"$WORK/other.out" 2>&1 && fail "--resume beside runs of other steps was accepted"
grep -q "ran with 60 steps, not 40" "$WORK/other.out" || { cat "$WORK/other.out"; fail "no reason for refusing runs outside the grid"; }
[ ! -e "$WORK/sw/async-wfbp-unshaped-1s4w" ] || fail "a point ran though the kept runs were refused"
# Any other setting the points share counts as well (recorded in sweep-settings.json).
timeout 60 "$PSBED" sweep --model lenet5 --data mnist --workers 1,2 --policy wfbp,p3 --mode async --steps 60 --batch 32 \
  --seed 7 --latency 5ms --out "$WORK/sw" --resume >"$WORK/other.out" 2>&1 && fail "--resume with another seed and latency was accepted"
grep -qF -- "ran with --latency not given (now 0.005s), --seed 1 (now 7)" "$WORK/other.out" ||
  { cat "$WORK/other.out"; fail "no reason for refusing another seed and latency"; }
# The same settings spelt otherwise (the model by its path, the partition in other units) are the
# same settings.
timeout 120 "$PSBED" sweep --model "$SRC/workloads/models/lenet5.toml" --data mnist --workers 1,2 --policy wfbp,p3 \
  --mode async --steps 60 --batch 32 --partition-bytes 4096KiB --out "$WORK/sw" --resume >"$WORK/resume.out" 2>&1 ||
  { tail -5 "$WORK/resume.out"; fail "resume failed"; }
[ "$(grep -c "kept (finished earlier)" "$WORK/resume.out")" = 4 ] || fail "--resume reran finished points"
# A policy's settings count for the kept runs whose policy uses them, as each was given them: a
# sweep of wfbp and p3 with p3's credit and slice, resumed with wfbp alone and neither, keeps its
# wfbp run (which never had them); resumed with p3 again, it is refused naming both, unless they
# are given as before (spelt otherwise).
timeout 120 "$PSBED" sweep --model lenet5 --data mnist --workers 1 --policy wfbp,p3 --credit 1MiB --slice-params 20000 \
  --steps 20 --batch 32 --no-plot --out "$WORK/pol" >"$WORK/pol.out" 2>&1 || { tail -5 "$WORK/pol.out"; fail "the policy sweep failed"; }
# (--bandwidth 0 is unshaped, as launch takes it: the same point, kept.)
timeout 120 "$PSBED" sweep --model lenet5 --data mnist --workers 1 --policy wfbp --steps 20 --batch 32 --no-plot \
  --bandwidth 0 --out "$WORK/pol" --resume >"$WORK/pol.out" 2>&1 ||
  { cat "$WORK/pol.out"; fail "--resume of wfbp alone was refused for settings wfbp never had"; }
grep -q "bsp-wfbp-unshaped-1s1w: kept (finished earlier)" "$WORK/pol.out" || fail "--resume of wfbp alone reran it"
timeout 60 "$PSBED" sweep --model lenet5 --data mnist --workers 1 --policy wfbp,p3 --steps 20 --batch 32 --no-plot \
  --out "$WORK/pol" --resume >"$WORK/pol.out" 2>&1 && fail "--resume of p3 with its settings gone was accepted"
grep -qF -- "--credit 1.00 MiB (now 4.00 MiB, p3's default) in bsp-p3-unshaped-1s1w" "$WORK/pol.out" &&
  grep -qF -- "--slice-params 20000 (now 40000) in bsp-p3-unshaped-1s1w" "$WORK/pol.out" ||
  { cat "$WORK/pol.out"; fail "no reason for refusing p3's other settings"; }
timeout 120 "$PSBED" sweep --model lenet5 --data mnist --workers 1 --policy wfbp,p3 --credit 1024KiB --slice-params 20000 \
  --steps 20 --batch 32 --no-plot --out "$WORK/pol" --resume >"$WORK/pol.out" 2>&1 ||
  { cat "$WORK/pol.out"; fail "--resume with p3's settings as before was refused"; }
[ "$(grep -c "kept (finished earlier)" "$WORK/pol.out")" = 2 ] || fail "--resume with p3's settings as before reran a point"
# Folders an earlier sweep named by another spelling of the rate (0, before it was unshaped) are
# kept under their names, and every row is labelled as this call names the rate, in the grid or not.
mkdir -p "$WORK/legacy"
cp -r "$WORK/pol/bsp-wfbp-unshaped-1s1w" "$WORK/legacy/bsp-wfbp-0-1s1w"
cp -r "$WORK/pol/bsp-p3-unshaped-1s1w" "$WORK/legacy/bsp-p3-0-1s1w"
timeout 60 "$PSBED" sweep --model lenet5 --data mnist --workers 1 --policy wfbp --steps 20 --batch 32 --no-plot \
  --out "$WORK/legacy" --resume >"$WORK/legacy.out" 2>&1 || { cat "$WORK/legacy.out"; fail "--resume of folders named -0- failed"; }
grep -q "bsp-wfbp-0-1s1w: kept (finished earlier)" "$WORK/legacy.out" || { cat "$WORK/legacy.out"; fail "the -0- run was not kept"; }
[ "$(cut -d, -f5 "$WORK/legacy/results.csv" | sort | uniq -c | awk '{print $1 $2}' | tr '\n' ' ')" = "1bandwidth 2unshaped " ] ||
  { cat "$WORK/legacy/results.csv"; fail "one rate under two labels in results.csv"; }
# --repeat 2 on the 1-worker points: their finished runs count as the first repeat, a second
# goes to <point>-r2/, and results.md shows the median with the two runs' range.
# (The results files of the earlier calls gone, as after a call killed with SIGKILL: the runs
# are read from their folders.)
rm -f "$WORK/sw/results.json" "$WORK/sw/results.csv"
timeout 300 "$PSBED" sweep --model lenet5 --data mnist --workers 1 --policy wfbp,p3 --mode async --steps 60 --batch 32 \
  --out "$WORK/sw" --resume --repeat 2 --no-plot >"$WORK/repeat.out" 2>&1 || { tail -20 "$WORK/repeat.out"; fail "--repeat failed"; }
[ "$(grep -c "kept (finished earlier)" "$WORK/repeat.out")" = 2 ] || fail "--repeat did not keep the first runs"
grep -q "async-wfbp-unshaped-1s1w-r2: [0-9.]* images/s.*(earlier repeats: [0-9.]*)" "$WORK/repeat.out" ||
  fail "no progress line with the earlier repeat"
# The 2-worker runs of the first call, outside this grid, stay in the results after its rows.
grep -q "kept 2 finished run(s) this call did not visit" "$WORK/repeat.out" ||
  fail "--resume with a smaller grid did not say it kept the earlier runs"
python3 - "$WORK/sw" <<'PY' || fail "the repeats, or the earlier runs, are not in the results"
import csv, json, os, sys
out = sys.argv[1]
rows = list(csv.DictReader(open(os.path.join(out, "results.csv"))))
assert sorted((r["point"], r["repeat"]) for r in rows) == sorted(
    [(p, k) for p in ("async-wfbp-unshaped-1s1w", "async-p3-unshaped-1s1w") for k in ("1", "2")]
    + [("async-wfbp-unshaped-1s2w", "1"), ("async-p3-unshaped-1s2w", "1")]), rows
assert [r["workers"] for r in rows[-2:]] == ["2", "2"], rows  # after this grid's own rows
for r in rows:
    s = json.load(open(os.path.join(out, r["run"], "summary.json")))
    assert r["ok"] == "1" and s["ok"] and s["workers"] == int(r["workers"]), r
    assert r["run"] == r["point"] + ("-r2" if r["repeat"] == "2" else ""), r
assert len(json.load(open(os.path.join(out, "results.json")))["runs"]) == 6
PY
grep -q "^| 1 | [0-9.]* ([0-9.]*-[0-9.]*) | [0-9.]* ([0-9.]*-[0-9.]*) |$" "$WORK/sw/results.md" ||
  fail "results.md lacks the median and range of the repeated points"
# results.md covers the runs results.csv has, the kept 2-worker runs outside this grid too: each
# finished run's figure is in its cell (the cell of a repeated point spans it).
python3 - "$WORK/sw" <<'PY' || { cat "$WORK/sw/results.md"; fail "results.md does not cover the runs of results.csv"; }
import csv, os, re, sys
out = sys.argv[1]
tables, head, cols = {}, None, None
for line in open(os.path.join(out, "results.md")):
    m = re.match(r"^## (.+), (.+), (\d+) server\(s\)$", line.strip())
    if m:
        head, cols = (m[1], m[2], m[3]), None
    elif head and line.startswith("| workers |"):
        cols = [c.strip() for c in line.strip().strip("|").split("|")][1:]
    elif head and cols and re.match(r"^\| \d+ \|", line):
        cells = [c.strip() for c in line.strip().strip("|").split("|")]
        for p, c in zip(cols, cells[1:]):
            tables[head + (p, cells[0])] = c
rows = list(csv.DictReader(open(os.path.join(out, "results.csv"))))
assert rows
for r in rows:
    cell = tables.get((r["mode"], r["bandwidth"], r["servers"], r["policy"], r["workers"]))
    assert cell is not None and cell != "-", (r["run"], cell)
    nums = [float(x) for x in re.findall(r"[0-9]+\.[0-9]", cell)]
    got = float(r["images_per_sec"])
    assert (len(nums) == 1 and abs(nums[0] - got) <= 0.051) or (len(nums) == 3 and nums[1] - 0.051 <= got <= nums[2] + 0.051), (r["run"], cell, got)
PY
echo "PASS"
