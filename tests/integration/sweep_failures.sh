#!/usr/bin/env bash
# `psbed sweep` and runs that go wrong: a point that lost a node (SIGKILL, or SIGTERM to one
# worker) is a failed point, not an N-worker result: ok=0 with the node and the reason in
# results.csv/json, no figure in results.md, a failed progress line, exit 1, and --resume runs
# it again. A failed point keeps what it measured (a run past --timeout, the survivors of a lost
# node), beside ok=0 and the reason, and the steps it was given; each --resume that runs a
# failed point again keeps the earlier attempts beside it (<point>.failed/, .failed-2/, ...).
source "$(dirname "$0")/lib.sh"
need_data
# lose SIGNAL WORKER POINT: once WORKER of the sweep's POINT trains, sends it SIGNAL.
lose() {
  local log="$WORK/sw/$3/logs/$2.log" pid=""
  for _ in $(seq 1 600); do grep -q "steps of batch" "$log" 2>/dev/null && break; sleep 0.05; done
  pid=$(pgrep -f -- "--name $2 .*$WORK/sw/$3" | head -1 || true)
  [ -n "$pid" ] || fail "$2 of $3 never trained"
  sleep 0.5
  kill "-$1" "$pid"
}

# 1. Two points of 3 workers: worker-2 of the first killed (SIGKILL), worker-1 of the second
#    stopped (SIGTERM: it reports its steps, then leaves). The survivors finish.
timeout 300 "$PSBED" sweep --model lenet5 --data mnist --workers 3 --policy wfbp,bulk --mode bsp --steps 400 \
  --batch 32 --no-plot --out "$WORK/sw" >"$WORK/sw.out" 2>&1 &
sweep_pid=$!
PIDS+=($sweep_pid)
lose KILL worker-2 bsp-wfbp-unshaped-1s3w
lose TERM worker-1 bsp-bulk-unshaped-1s3w
rc=0
wait "$sweep_pid" || rc=$?
[ "$rc" = 1 ] || { tail -5 "$WORK/sw.out"; fail "a sweep whose points lost a node exited $rc, expected 1"; }
grep -q "\[1/2\] bsp-wfbp-unshaped-1s3w failed: lost worker-2" "$WORK/sw.out" ||
  { cat "$WORK/sw.out"; fail "no failed progress line naming the killed worker"; }
grep -q "\[2/2\] bsp-bulk-unshaped-1s3w failed: lost worker-1 (stopped by SIGTERM" "$WORK/sw.out" ||
  { cat "$WORK/sw.out"; fail "no failed progress line naming the stopped worker"; }
python3 - "$WORK/sw" <<'PY' || fail "a point that lost a node counts as a result"
import csv, json, os, sys
out = sys.argv[1]
rows = {r["run"]: r for r in csv.DictReader(open(os.path.join(out, "results.csv")))}
runs = {r["run"]: r for r in json.load(open(os.path.join(out, "results.json")))["runs"]}
for run, lost in (("bsp-wfbp-unshaped-1s3w", "worker-2"), ("bsp-bulk-unshaped-1s3w", "worker-1")):
    s = json.load(open(os.path.join(out, run, "summary.json")))
    # launch and the coordinator call it ok (the survivors finished) and name the node lost
    assert s["ok"] and [n["name"] for n in s["failed_nodes"]] == [lost], (s["ok"], s["failed_nodes"])
    r, j = rows[run], runs[run]
    assert r["ok"] == "0" and r["failed_nodes"] == lost and lost in r["failure"], r
    assert j["ok"] is False and j["failed_nodes"] == [lost] and lost in j["failure"], j
    # what the survivors measured, and the steps the point was given, are kept
    assert s["images_per_sec"] > 0 and abs(float(r["images_per_sec"]) - s["images_per_sec"]) <= 1e-3 * s["images_per_sec"], r
    assert j["images_per_sec"] == s["images_per_sec"] and r["steps"] == "400" and j["steps"] == 400, (r, j)
md = open(os.path.join(out, "results.md")).read()
assert "## Runs that failed" in md and "| bsp-wfbp-unshaped-1s3w | lost worker-2" in md, md
PY
if grep -q "^| 3 |.*[0-9]\.[0-9]" "$WORK/sw/results.md"; then cat "$WORK/sw/results.md"; fail "results.md gives a figure for a point that lost a node"; fi

# --resume runs both again (nothing is lost this time): they count now.
timeout 300 "$PSBED" sweep --model lenet5 --data mnist --workers 3 --policy wfbp,bulk --mode bsp --steps 400 \
  --batch 32 --no-plot --out "$WORK/sw" --resume >"$WORK/resume.out" 2>&1 ||
  { tail -5 "$WORK/resume.out"; fail "--resume after the lost nodes failed"; }
if grep -q "kept (finished earlier)" "$WORK/resume.out"; then fail "--resume kept a point that lost a node"; fi
python3 - "$WORK/sw" <<'PY' || fail "--resume did not rerun the points that lost a node"
import csv, json, os, sys
out = sys.argv[1]
rows = list(csv.DictReader(open(os.path.join(out, "results.csv"))))
assert len(rows) == 2, rows
for r in rows:
    s = json.load(open(os.path.join(out, r["run"], "summary.json")))
    assert r["ok"] == "1" and not r["failed_nodes"] and not r["failure"] and not s["failed_nodes"], r
    assert float(r["images_per_sec"]) > 0, r
PY

# 2. A point past --timeout, and one whose coordinator is killed: both failed, the first with
#    the steps and images/s it measured, the second with nothing measured; both with the steps
#    they were given.
timeout 300 "$PSBED" sweep --model lenet5 --data mnist --workers 1 --policy wfbp,bulk --steps 100000 --timeout 3 \
  --batch 32 --no-plot --out "$WORK/sw2" >"$WORK/sw2.out" 2>&1 &
sweep_pid=$!
PIDS+=($sweep_pid)
log="$WORK/sw2/bsp-bulk-unshaped-1s1w/logs/worker-0.log"
for _ in $(seq 1 600); do grep -q "steps of batch" "$log" 2>/dev/null && break; sleep 0.05; done
coordinator=$(pgrep -f -- "coordinator .*$WORK/sw2/bsp-bulk-unshaped-1s1w" | head -1 || true)
[ -n "$coordinator" ] || fail "no coordinator of the second point"
kill -KILL "$coordinator"
rc=0
wait "$sweep_pid" || rc=$?
[ "$rc" = 1 ] || { tail -5 "$WORK/sw2.out"; fail "a sweep with failed points exited $rc, expected 1"; }
grep -q "bsp-wfbp-unshaped-1s1w failed: the run took longer than --timeout 3 s ([0-9.]* images/s measured, not counted)" \
  "$WORK/sw2.out" || { cat "$WORK/sw2.out"; fail "no failed progress line with what the timed-out run measured"; }
python3 - "$WORK/sw2" <<'PY' || fail "a failed point's measurements or steps are not in the results"
import csv, json, os, sys
out = sys.argv[1]
rows = {r["run"]: r for r in csv.DictReader(open(os.path.join(out, "results.csv")))}
runs = {r["run"]: r for r in json.load(open(os.path.join(out, "results.json")))["runs"]}
late, killed = "bsp-wfbp-unshaped-1s1w", "bsp-bulk-unshaped-1s1w"
s = json.load(open(os.path.join(out, late, "summary.json")))
r, j = rows[late], runs[late]
assert r["ok"] == "0" and "--timeout" in r["failure"] and r["steps"] == "100000", r
steps = s["per_worker"][0]["steps"]
assert 0 < steps < 100000 and r["steps_done"] == str(steps) and j["steps_done"] == steps, (r, s["per_worker"])
assert s["images_per_sec"] > 0 and abs(float(r["images_per_sec"]) - s["images_per_sec"]) <= 1e-3 * s["images_per_sec"], r
assert abs(float(r["steps_per_sec"]) - s["steps_per_sec"]) <= 1e-3 * s["steps_per_sec"] and j["images_per_sec"] == s["images_per_sec"], r
s = json.load(open(os.path.join(out, killed, "summary.json")))
assert "images_per_sec" not in s and "steps" not in s, s  # launch wrote it: the coordinator never did
r, j = rows[killed], runs[killed]
assert r["ok"] == "0" and "coordinator killed" in r["failure"] and r["failed_nodes"] == "coordinator", r
assert r["steps"] == "100000" and j["steps"] == 100000, r
assert r["images_per_sec"] == "" and j["images_per_sec"] is None and r["steps_done"] == "", r  # nothing measured: not 0
PY

# 3. --resume twice on the timed-out point (it times out again each time): every failed attempt
#    is kept, the first in <point>.failed/, the second in <point>.failed-2/, each as it was.
p="$WORK/sw2/bsp-wfbp-unshaped-1s1w"
sums=("$(md5sum <"$p/summary.json")")
for k in 1 2; do
  rc=0
  timeout 120 "$PSBED" sweep --model lenet5 --data mnist --workers 1 --policy wfbp --steps 100000 --timeout 3 \
    --batch 32 --no-plot --out "$WORK/sw2" --resume >"$WORK/again-$k.out" 2>&1 || rc=$?
  [ "$rc" = 1 ] || { tail -5 "$WORK/again-$k.out"; fail "resume $k of a point that times out exited $rc, expected 1"; }
  sums+=("$(md5sum <"$p/summary.json")")
done
grep -q "bsp-wfbp-unshaped-1s1w: the earlier failed run moved to $p.failed-2$" "$WORK/again-2.out" ||
  { cat "$WORK/again-2.out"; fail "the second resume did not say where the earlier failed run went"; }
[ "$(md5sum <"$p.failed/summary.json")" = "${sums[0]}" ] || fail "<point>.failed/ no longer holds the first attempt"
[ "$(md5sum <"$p.failed-2/summary.json")" = "${sums[1]}" ] || fail "<point>.failed-2/ does not hold the second attempt"
[ "${sums[0]}" != "${sums[1]}" ] && [ "${sums[1]}" != "${sums[2]}" ] || fail "the attempts' summaries are not three"
[ -s "$p.failed/launch.log" ] && [ -s "$p.failed-2/launch.log" ] || fail "a failed attempt lost its launch.log"
[ "$(ls -d "$p".failed* | wc -l)" = 2 ] || { ls "$WORK/sw2"; fail "expected two failed attempts beside the point"; }
echo "PASS"
