#!/usr/bin/env bash
# launch --push-pull (async): the worker pulls only at its first step, and the summary says so.
# psbed profile measures a data message's CPU from such a run (--push-pull-run) and refuses the
# runs the wrong way round; predict and validate simulate push-pull, faster than push then pull;
# sweep passes it on, with --connections.
source "$(dirname "$0")/lib.sh"
need_data
common=(--servers 1 --workers 1 --model lenet5 --data mnist --steps 40 --batch 32 --mode async --policy wfbp)
timeout 120 "$PSBED" launch "${common[@]}" --out "$WORK/plain" >"$WORK/plain.out" 2>&1 ||
  { cat "$WORK/plain.out"; fail "launch without push-pull failed"; }
timeout 120 "$PSBED" launch "${common[@]}" --push-pull --out "$WORK/pp" >"$WORK/pp.out" 2>&1 ||
  { cat "$WORK/pp.out"; fail "launch --push-pull failed"; }
python3 - "$WORK" <<'PY' || fail "the push-pull run's summary or trace"
import json, sys
w = sys.argv[1]
assert json.load(open(f"{w}/pp/summary.json")).get("push_pull") is True
assert "push_pull" not in json.load(open(f"{w}/plain/summary.json"))
def transfers(run):
    t = json.load(open(f"{run}/traces/worker-0.trace.json"))
    ev = t["traceEvents"] if isinstance(t, dict) else t
    return {c: sum(1 for e in ev if e.get("ph") == "b" and e.get("cat") == c) for c in ("push", "pull")}
plain, pp = transfers(f"{w}/plain"), transfers(f"{w}/pp")
print("transfers without push-pull", plain, "with", pp)
assert plain["pull"] == plain["push"] > 0, plain
assert pp["push"] == plain["push"] and 0 < pp["pull"] <= pp["push"] // 40, pp  # step 0's pulls only
PY
"$PSBED" profile "$WORK/plain" --push-pull-run "$WORK/pp" -o "$WORK/profile.json" >"$WORK/profile.out" 2>&1 ||
  { cat "$WORK/profile.out"; fail "profile --push-pull-run failed"; }
grep -q "push-pull: .* per (data) message" "$WORK/profile.out" || { cat "$WORK/profile.out"; fail "no push-pull line"; }
python3 - "$WORK/profile.json" <<'PY' || fail "the profile's data message CPU"
import json, sys
p = json.load(open(sys.argv[1]))
assert p["host"]["cpu_per_data_message_us"] > 0, p["host"]
assert p["source"]["push_pull_run"]["cpu_per_message_us"] == p["host"]["cpu_per_data_message_us"]
PY
expect_refusal() {  # expect_refusal TEXT ARGS...: exit status 1 and TEXT in the one-line error
  local text=$1; shift
  local rc=0; "$PSBED" "$@" >"$WORK/r.out" 2>&1 || rc=$?
  [ "$rc" = 1 ] && grep -qF -- "$text" "$WORK/r.out" || { cat "$WORK/r.out"; fail "not refused: $*"; }
}
expect_refusal "the profiled run used push-pull itself" profile "$WORK/pp" --push-pull-run "$WORK/plain" -o "$WORK/x.json"
expect_refusal "not a push-pull run" profile "$WORK/plain" --push-pull-run "$WORK/plain" -o "$WORK/x.json"
timeout 120 "$PSBED" launch --servers 1 --workers 1 --model lenet5 --data mnist --steps 20 --batch 32 --mode bsp \
  --policy wfbp --push-pull --out "$WORK/pp-bsp" >"$WORK/pp-bsp.out" 2>&1 || { cat "$WORK/pp-bsp.out"; fail "launch bsp --push-pull failed"; }
expect_refusal "whose acknowledgments are header messages" profile "$WORK/plain" --push-pull-run "$WORK/pp-bsp" -o "$WORK/x.json"
[ ! -e "$WORK/x.json" ] || fail "a refused profile was written"
for pp in "" --push-pull; do
  # shellcheck disable=SC2086  # $pp: the flag or nothing
  "$PSBED" predict --profile "$WORK/profile.json" --workers 2 --mode async --policy wfbp --steps 60 --seeds 3 $pp \
    --json "$WORK/predict$pp.json" >/dev/null 2>&1 || fail "predict $pp failed"
done
"$PSBED" validate --profile "$WORK/profile.json" "$WORK/pp" --out "$WORK/report" >"$WORK/validate.out" 2>&1 ||
  { cat "$WORK/validate.out"; fail "validate failed"; }
python3 - "$WORK" <<'PY' || fail "predict and validate with push-pull"
import json, sys
w = sys.argv[1]
def first(path):
    return json.load(open(path))[0]
a, b = first(f"{w}/predict.json"), first(f"{w}/predict--push-pull.json")
print(f"predicted images/s: {a['images_per_sec']:.0f} push then pull, {b['images_per_sec']:.0f} push-pull")
assert b["push_pull"] is True and a["push_pull"] is False
assert b["images_per_sec"] > a["images_per_sec"]
v = json.load(open(f"{w}/report/validation.json"))
rows = v["runs"]
assert rows[0]["push_pull"] is True, rows[0]
PY
# bsp, 2 workers, 2 shards, p3 with a credit of 40 KiB (smaller than the clock's pushes: a push
# whose answer waits for the other worker is acknowledged first): push-pull ends with the
# parameters of push then pull, bit for bit (two workers' sums cannot round differently).
bsp=(--servers 2 --workers 2 --model lenet5 --data mnist --steps 30 --batch 32 --mode bsp --policy p3
  --slice-params 5000 --credit 40KiB)
timeout 120 "$PSBED" launch "${bsp[@]}" --out "$WORK/bsp" --save-params "$WORK/bsp.bin" >"$WORK/bsp.out" 2>&1 ||
  { cat "$WORK/bsp.out"; fail "launch bsp failed"; }
timeout 120 "$PSBED" launch "${bsp[@]}" --push-pull --out "$WORK/bsp-pp" --save-params "$WORK/bsp-pp.bin" \
  >"$WORK/bsp-pp.out" 2>&1 || { cat "$WORK/bsp-pp.out"; fail "launch bsp --push-pull failed"; }
cmp -s "$WORK/bsp.bin" "$WORK/bsp-pp.bin" || fail "bsp push-pull's parameters differ from push then pull"
grep -q '"push_pull": true' "$WORK/bsp-pp/summary.json" || fail "the bsp push-pull summary does not say so"
echo "bsp, 2 workers: the same parameters with push-pull"
# sweep passes both to every run.
timeout 120 "$PSBED" sweep --workers 1 --servers 1 --policy wfbp --mode async --model lenet5 --data mnist \
  --steps 20 --batch 32 --push-pull --connections 2 --no-plot --out "$WORK/sweep" >"$WORK/sweep.out" 2>&1 ||
  { cat "$WORK/sweep.out"; fail "sweep --push-pull failed"; }
grep -l '"push_pull": true' "$WORK"/sweep/*/summary.json >/dev/null || fail "the sweep's run did not push-pull"
grep -l '"connections": 2' "$WORK"/sweep/*/summary.json >/dev/null || fail "the sweep's run had one connection"
echo "PASS"
