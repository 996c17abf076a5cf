#!/usr/bin/env bash
# A live --comm switch: `psbed ctl comm sfb` moves a running bsp cluster's fc layers to the
# factors, `ctl comm hybrid` (asked at once: a switch waits until every worker took the last)
# sends fc3 back to the shards, and `ctl comm ps` the rest, each at one step every worker takes
# together. The parameters
# and momentum cross exactly both ways (the shards' to every worker, then the lowest-id worker's
# to the shards with op Assign), so the final parameters are those of an unswitched --comm ps
# run, to float rounding (1e-4 of their largest magnitude, as sfb_matches_ps.sh). The summary
# lists both switches, each worker's trace marks them on its control lane, and bad requests are
# refused with one line. worker-0 sleeps 40 ms a step (bsp paces everyone to it), leaving time to
# switch twice.
source "$(dirname "$0")/lib.sh"
need_data
common=(--servers 2 --workers 3 --model mlp --data mnist --batch 32 --lr 0.03 --momentum 0.9
  --weight-decay 0.0005 --mode bsp --comm ps --seed 1 --threads 1)
timeout 120 "$PSBED" launch "${common[@]}" --steps 150 --straggler-ms 40 --out "$WORK/run" \
  --save-params "$WORK/switched.bin" >"$WORK/run.out" 2>&1 &
PIDS+=($!)
ask() {  # MODE WHILE PAUSE: ctl comm MODE, asked again while its refusal matches WHILE
  for _ in $(seq 1 100); do
    "$PSBED" ctl --run "$WORK/run" comm "$1" --timeout 20 >"$WORK/$1.out" 2>&1 && return 0
    grep -q "$2" "$WORK/$1.out" || { cat "$WORK/$1.out"; fail "ctl comm $1 failed"; }
    sleep "$3"
  done
}
# Asked until the cluster has started: before that it is refused, saying so.
ask sfb "has not started yet\|no coordinator endpoint" 0.2
cat "$WORK/sfb.out"
to_sfb=$(sed -n 's/^comm sfb from step \([0-9]*\) (was ps): fc1 sfb.*/\1/p' "$WORK/sfb.out")
[ -n "$to_sfb" ] || fail "ctl comm sfb did not print the step and the routes"
# Bad requests: one line each, and nothing changes.
for bad in "nonsense:unknown communication 'nonsense', expected ps, sfb or hybrid" \
  "sfb:the run already uses --comm sfb"; do
  if "$PSBED" ctl --run "$WORK/run" comm "${bad%%:*}" --timeout 10 >"$WORK/bad.out" 2>&1; then fail "ctl comm ${bad%%:*} was accepted"; fi
  [ "$(wc -l <"$WORK/bad.out")" = 1 ] && grep -qF "${bad#*:}" "$WORK/bad.out" || { cat "$WORK/bad.out"; fail "ctl comm ${bad%%:*}: not one line with the reason"; }
done
ask hybrid "already under way" 0.05
cat "$WORK/hybrid.out"
to_hybrid=$(sed -n 's/^comm hybrid from step \([0-9]*\) (was sfb): fc1 sfb.*fc3 ps.*/\1/p' "$WORK/hybrid.out")
[ -n "$to_hybrid" ] && [ "$to_hybrid" -gt "$to_sfb" ] || fail "ctl comm hybrid: step '$to_hybrid' after $to_sfb"
sleep 1
"$PSBED" ctl --run "$WORK/run" comm ps --timeout 20 >"$WORK/ps.out" 2>&1 || { cat "$WORK/ps.out"; fail "ctl comm ps failed"; }
cat "$WORK/ps.out"
to_ps=$(sed -n 's/^comm ps from step \([0-9]*\) (was hybrid): fc1 ps.*/\1/p' "$WORK/ps.out")
[ -n "$to_ps" ] && [ "$to_ps" -gt "$to_hybrid" ] || fail "ctl comm ps: step '$to_ps' after $to_hybrid"
wait "${PIDS[0]}" || { tail -20 "$WORK/run.out"; fail "the switched run failed"; }
# The summary: the switches at the steps ctl printed, on every worker, factors sent between.
python3 - "$WORK/run/summary.json" "$to_sfb" "$to_hybrid" "$to_ps" <<'PY' || fail "the summary does not show the switches"
import json, sys
s = json.load(open(sys.argv[1])); steps = [int(a) for a in sys.argv[2:]]
assert s["ok"] and s["comm"] == "ps" and s["comm_final"] == "ps", (s["ok"], s["comm"], s["comm_final"])
sw = s["comm_switches"]
assert [x["mode"] for x in sw] == ["sfb", "hybrid", "ps"] and [x["step"] for x in sw] == steps, sw
assert [[l["route"] for l in x["layers"]] for x in sw] == [["sfb"] * 3, ["sfb", "sfb", "ps"], ["ps"] * 3], sw
assert all(x["effective_s"] >= x["requested_s"] > 0 for x in sw), sw
for w in s["per_worker"]:
    assert [x["step"] for x in w["comm_switches"]] == steps, (w["name"], w["comm_switches"])
    assert w["bytes_factors"] > 0 and w["factors_refused"] == 0, w
print("switches at steps", steps, "on every worker")
PY
# Each worker's trace marks them on its control lane, at those steps.
for w in worker-0 worker-1 worker-2; do
  python3 - "$WORK/run/traces/$w.trace.json" "$to_sfb" "$to_hybrid" "$to_ps" <<'PY' || fail "$w's trace lacks the switches"
import json, sys
t = json.load(open(sys.argv[1]))
lanes = {e["tid"]: e["args"]["name"] for e in t["traceEvents"] if e.get("ph") == "M" and e["name"] == "thread_name"}
marks = [e for e in t["traceEvents"] if e.get("name", "").startswith("comm:")]
assert [(m["name"], m["args"]["step"]) for m in marks] == list(zip(["comm:sfb", "comm:hybrid", "comm:ps"], map(int, sys.argv[2:]))), marks
assert all(lanes[m["tid"]] == "control" for m in marks)
PY
done
grep -q "\-\-comm switch 3: ps from step $to_ps (was hybrid)" "$WORK/run/logs/coordinator.log" || fail "the coordinator log does not say the switch"
# The same run unswitched: the same parameters, to float rounding.
timeout 120 "$PSBED" launch "${common[@]}" --steps 150 --no-trace --out "$WORK/ref" --save-params "$WORK/ref.bin" \
  >"$WORK/ref.out" 2>&1 || { tail -20 "$WORK/ref.out"; fail "the unswitched run failed"; }
python3 - "$WORK/ref.bin" "$WORK/switched.bin" <<'PY' || fail "the switched run's parameters differ from the unswitched run's"
import array, sys
a = array.array('f', open(sys.argv[1], 'rb').read())
b = array.array('f', open(sys.argv[2], 'rb').read())
assert len(a) == len(b) and len(a) > 0, (len(a), len(b))
d = max(abs(x - y) for x, y in zip(a, b))
scale = max(abs(x) for x in a)
print(f"max |unswitched - switched| = {d:.3g}, {d / scale:.3g} of max |w| = {scale:.3g}")
sys.exit(0 if d <= 1e-4 * scale else 1)
PY
# Async has no step to gather factors at: refused with one line, the run goes on.
timeout 120 "$PSBED" launch "${common[@]/bsp/async}" --straggler-ms 40 --steps 60 --no-trace --out "$WORK/async" \
  >"$WORK/async.out" 2>&1 &
PIDS+=($!)
for _ in $(seq 1 100); do
  if "$PSBED" ctl --run "$WORK/async" comm sfb --timeout 10 >"$WORK/bad.out" 2>&1; then fail "ctl comm sfb on an async run was accepted"; fi
  grep -q "has not started yet\|no coordinator endpoint" "$WORK/bad.out" || break
  sleep 0.2
done
[ "$(wc -l <"$WORK/bad.out")" = 1 ] && grep -q "needs --mode bsp or ssp:K: async has no step" "$WORK/bad.out" \
  || { cat "$WORK/bad.out"; fail "ctl comm sfb on async: not one line with the reason"; }
wait "${PIDS[1]}" || { tail -20 "$WORK/async.out"; fail "the async run failed after the refusal"; }
echo "PASS"
