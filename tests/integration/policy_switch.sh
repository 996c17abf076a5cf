#!/usr/bin/env bash
# A live policy switch: `psbed ctl` switches a running bsp cluster from wfbp to p3; every worker
# switches at a step boundary, ctl prints that step, the traces mark it on the control lane, and
# the summary lists it. Bad requests are refused with a reason and change nothing.
source "$(dirname "$0")/lib.sh"
need_data
timeout 300 "$PSBED" launch --servers 2 --workers 2 --model lenet5 --data mnist --steps 3000 --batch 32 \
  --lr 0.02 --mode bsp --out "$WORK/run" >"$WORK/run.out" 2>&1 &
PIDS+=($!)
[ -n "$(node_pid worker-1)" ] || fail "worker-1 never started"
sleep 1
"$PSBED" ctl --run "$WORK/run" policy fastest --timeout 10 >"$WORK/bad.out" 2>&1 && fail "an unknown policy was accepted"
grep -q "unknown policy 'fastest'" "$WORK/bad.out" || { cat "$WORK/bad.out"; fail "no reason for the unknown policy"; }
# A bad slice or credit is a usage error ctl names itself (exit 2), not sent (nor dropped and the
# switch made anyway).
rc=0; "$PSBED" ctl --run "$WORK/run" policy p3 --slice-params -5 --timeout 10 >"$WORK/bad.out" 2>&1 || rc=$?
[ "$rc" = 2 ] || { cat "$WORK/bad.out"; fail "a negative slice exited $rc, not 2"; }
grep -qF -- "--slice-params: expected a parameter count, above 0 and below 10^9, got '-5'" "$WORK/bad.out" || { cat "$WORK/bad.out"; fail "the bad slice is not named"; }
rc=0; "$PSBED" ctl --run "$WORK/run" policy p3 --credit lots --timeout 10 >"$WORK/bad.out" 2>&1 || rc=$?
[ "$rc" = 2 ] && grep -qF -- "--credit: bad size 'lots'" "$WORK/bad.out" || { cat "$WORK/bad.out"; fail "a bad credit was not refused by ctl"; }
# A setting the policy does not use is refused, not kept for a later switch.
"$PSBED" ctl --run "$WORK/run" policy wfbp --slice-params 1000 --timeout 10 >"$WORK/bad.out" 2>&1 && fail "a slice for wfbp was accepted"
grep -qF -- "--slice-params is for p3 and prophet, not wfbp" "$WORK/bad.out" || { cat "$WORK/bad.out"; fail "the unused slice is not named"; }
# The cluster and the policy's settings from a config file (--config; the policy's flags in a
# [policy] section): `status` with that file stays a status request and switches nothing.
printf 'run = "%s"\ntimeout = 20\n[policy]\ncredit = "2MiB"\nslice-params = 20000\n' "$WORK/run" >"$WORK/ctl.toml"
"$PSBED" ctl --config "$WORK/ctl.toml" status --json >"$WORK/before.json" 2>&1 || { cat "$WORK/before.json"; fail "ctl --config status failed"; }
json "$WORK/before.json" 's["policy"]["policy"]' | grep -qx wfbp || fail "ctl --config status switched the policy"
"$PSBED" ctl --config "$WORK/ctl.toml" policy p3 >"$WORK/ctl.out" 2>&1 ||
  { cat "$WORK/ctl.out"; fail "ctl policy p3 failed"; }
cat "$WORK/ctl.out"
step=$(sed -n 's/.*took effect at step \([0-9]*\).*/\1/p' "$WORK/ctl.out")
[ -n "$step" ] || fail "ctl did not print the step"
"$PSBED" ctl --run "$WORK/run" status --output json --timeout 10s >"$WORK/status.json" || fail "ctl status failed"
json "$WORK/status.json" 's["policy"]["policy"]' | grep -qx p3 || fail "status does not show p3"
# ... and so does each worker's row, at once (not at its next progress report).
json "$WORK/status.json" 'sys.exit(0 if all(w.get("policy") == "p3" for w in s["workers"] if w.get("alive")) else 1)' ||
  { cat "$WORK/status.json"; fail "a worker's status row does not show p3 after the switch"; }
wait "${PIDS[0]}" || { tail -20 "$WORK/run.out"; fail "the run failed"; }
json "$WORK/run/summary.json" 'sys.exit(0 if s["ok"] and s["policy"] == "wfbp" and s["policy_final"] == "p3" else 1)' ||
  fail "summary does not show wfbp -> p3"
[ "$(json "$WORK/run/summary.json" 'len(s["policy_switches"])')" = 1 ] || fail "expected one switch in the summary"
[ "$(json "$WORK/run/summary.json" 's["policy_switches"][0]["step"]')" = "$step" ] || fail "summary step differs from ctl's"
json "$WORK/run/summary.json" 's["policy_switches"][0]["policy"]["credit_bytes"]' | grep -qx 2097152 || fail "credit not recorded"
# Each worker's trace marks the switch at the step it reported, and sends p3 slices after it.
for w in worker-0 worker-1; do
  python3 - "$WORK/run/traces/$w.trace.json" "$WORK/run/summary.json" "$w" <<'PY' || fail "$w trace"
import json, sys
t = json.load(open(sys.argv[1])); s = json.load(open(sys.argv[2])); w = sys.argv[3]
lanes = {e["tid"]: e["args"]["name"] for e in t["traceEvents"] if e.get("ph") == "M" and e["name"] == "thread_name"}
marks = [e for e in t["traceEvents"] if e.get("name", "").startswith("policy:")]
assert len(marks) == 1 and marks[0]["name"] == "policy:p3", marks
assert lanes[marks[0]["tid"]] == "control"
at = marks[0]["args"]["step"]
assert at == s["policy_switches"][0]["workers"][w], (at, s["policy_switches"])
# After the switch, conv1.weight (150 floats) still goes whole, but fc1.weight (48,000 floats) is
# pushed as 20,000-parameter slices: 80,000 bytes at most per push event.
fc1 = [e for e in t["traceEvents"] if e.get("ph") == "b" and e.get("name", "").startswith("push:fc1.weight")]
before = [e["args"]["bytes"] for e in fc1 if e["args"]["step"] < at]
after = [e["args"]["bytes"] for e in fc1 if e["args"]["step"] > at]
assert before and max(before) > 80000, max(before or [0])
assert after and max(after) <= 80000, max(after or [0])
print(w, "switched at step", at)
PY
done
# Its profile says that the run mixes two policies, and keeps the switches.
"$PSBED" profile "$WORK/run" --worker worker-0 -o "$WORK/profile.json" >"$WORK/profile.out" 2>&1 ||
  { cat "$WORK/profile.out"; fail "the switched run does not profile"; }
grep -q "warning: the run switched its policy 1 time(s) (from wfbp to p3 at the end)" "$WORK/profile.out" ||
  { cat "$WORK/profile.out"; fail "profile did not say the run switched policy"; }
json "$WORK/profile.json" 'sys.exit(0 if s["source"]["policy_switches"] == 1 and s["source"]["policy_final"] == "p3" else 1)' ||
  fail "the profile does not record the switch"
# The run has finished: ctl says so at once rather than waiting out its --timeout.
start=$SECONDS
if "$PSBED" ctl --run "$WORK/run" status --timeout 30 >"$WORK/after.out" 2>&1; then fail "ctl status on a finished run succeeded"; fi
grep -q "has finished" "$WORK/after.out" || { cat "$WORK/after.out"; fail "ctl on a finished run: no reason"; }
[ $((SECONDS - start)) -lt 5 ] || fail "ctl on a finished run took $((SECONDS - start)) s"
echo "PASS"
