#!/usr/bin/env bash
# A run ended early keeps what it measured: past --timeout, and on Ctrl-C (SIGINT to the
# launcher) or a closed terminal (SIGHUP), the coordinator stops the workers at once, they report the steps they did and write
# their traces, and summary.json has each worker's steps and images/s beside the reason; the
# traces profile like a finished run's.
# (A heartbeat timeout of 10 s: a loaded machine must not get a worker declared dead here.)
source "$(dirname "$0")/lib.sh"
check() {  # check RUN REASON: the summary and traces of an interrupted run
  python3 - "$1/summary.json" "$2" <<'PY' || fail "$1: the interrupted run's measurements are not in its summary"
import json, sys
s = json.load(open(sys.argv[1]))
assert not s["ok"] and sys.argv[2] in s["failure"], (s["ok"], s.get("failure"))
assert len(s["per_worker"]) == 2, s["per_worker"]
for w in s["per_worker"]:
    assert "steps" in w, (w, s.get("failed_nodes"), s["launch"].get("processes"))
for w in s["per_worker"]:
    assert 10 < w["steps"] < 100000 and w["images_per_sec"] > 0, w
assert s["images_per_sec"] > 0
# The coordinator, stopped by the launcher's SIGTERM, exits as a stopped node does.
coordinator = [p for p in s["launch"]["processes"] if p["name"] == "coordinator"][0]
assert coordinator["status"] == "exited with status 130", coordinator
print(f"{sys.argv[2]}: " + ", ".join(f"{w['name']} {w['steps']} steps" for w in s["per_worker"]) + f", {s['images_per_sec']:.0f} images/s")
PY
  for t in worker-0 worker-1 server-0; do [ -s "$1/traces/$t.trace.json" ] || fail "$1: no trace of $t"; done
  # The coordinator's log lines are in its log file as well as on the terminal.
  grep -q "cluster complete" "$1/logs/coordinator.log" || fail "$1: logs/coordinator.log lacks the coordinator's lines"
}
# training 'PATTERN': waits up to 10 s for a worker's log to show it training; the pattern is a
# glob matched afresh each time, so it may name a folder not made yet.
training() {
  # shellcheck disable=SC2086  # the glob is meant to expand here
  for _ in $(seq 1 200); do grep -q "steps of batch" $1 2>/dev/null && return; sleep 0.05; done
}
# start_run NAME SECONDS: a long run in the background, as `timeout psbed launch`; once worker-1
# trained for SECONDS, sets `launcher` to the launcher's pid.
start_run() {
  timeout 60 "$PSBED" launch --model lenet5 --data synthetic --steps 100000 --batch 16 --workers 2 --heartbeat-timeout 10 \
    --out "$WORK/$1" >"$WORK/$1.out" 2>&1 &
  PIDS+=($!)
  training "$WORK/$1/logs/worker-1.log"
  sleep "$2"
  launcher=$(pgrep -P "${PIDS[-1]}" -f -- "psbed launch" | head -1)
  [ -n "$launcher" ] || fail "no launcher to interrupt"
}
# wait_exit NAME: the background run's exit status must be 130 (interrupted).
wait_exit() {
  local rc
  set +e
  wait "${PIDS[-1]}"
  rc=$?
  set -e
  [ "$rc" = 130 ] || { tail -20 "$WORK/$1.out"; fail "$1: an interrupted launch exited $rc, expected 130"; }
}
timeout 60 "$PSBED" launch --model lenet5 --data synthetic --steps 100000 --batch 16 --workers 2 --timeout 3 --heartbeat-timeout 10 \
  --out "$WORK/timeout" >"$WORK/timeout.out" 2>&1 && fail "a run past --timeout succeeded"
check "$WORK/timeout" "took longer than --timeout"
# Its traces profile like a finished run's: the warm-up counts over the steps it did.
timeout 60 "$PSBED" profile "$WORK/timeout" --worker worker-0 -o "$WORK/profile.json" >"$WORK/profile.out" 2>&1 ||
  { cat "$WORK/profile.out"; fail "the interrupted run's traces do not profile"; }
grep -q "warning: the run did not finish (the run took longer than --timeout" "$WORK/profile.out" ||
  { cat "$WORK/profile.out"; fail "profile did not say the run was cut short"; }

# One Ctrl-C can reach the launcher twice within milliseconds (on `timeout psbed launch` the
# terminal signals both, and timeout passes its signal on to the launcher and to its group): a
# repeat 0.1 s after the first is one interruption, not a second Ctrl-C (which stops every
# process at once, losing the measurements).
start_run int 2
kill -INT "$launcher"
sleep 0.1
kill -INT "$launcher" 2>/dev/null || true
wait_exit int
check "$WORK/int" "interrupted"

# A second Ctrl-C, a second after the first, stops every process at once: here worker-1 is
# stopped (SIGSTOP) and never reports, so the coordinator would wait 5 s for it.
start_run twice 1
stopped=$(pgrep -f -- "--name worker-1 .*$WORK/twice" | head -1)
[ -n "$stopped" ] || fail "no worker-1 to stop"
kill -STOP "$stopped"
kill -INT "$launcher"
sleep 1
kill -INT "$launcher"
start=$SECONDS
wait_exit twice
grep -q "interrupted again: stopping every process now" "$WORK/twice.out" || { tail -20 "$WORK/twice.out"; fail "the second Ctrl-C was not taken as one"; }
[ $((SECONDS - start)) -le 6 ] || fail "the launch took $((SECONDS - start)) s to stop after the second Ctrl-C"
json "$WORK/twice/summary.json" 'sys.exit(0 if s["failure"] == "interrupted" else 1)' || fail "no summary after a second Ctrl-C"
echo "a second Ctrl-C: every process stopped within $((SECONDS - start)) s"

# A closed terminal (SIGHUP) ends the run as Ctrl-C does, keeping what it measured.
start_run hup 1
kill -HUP "$launcher"
wait_exit hup
check "$WORK/hup" "interrupted (hangup)"
# Output into a pipe closed early (`| head`) loses the output, not the run.
set +e
timeout 60 "$PSBED" launch --model lenet5 --data synthetic --steps 300 --batch 16 --workers 2 --heartbeat-timeout 10 \
  --out "$WORK/pipe" 2>&1 | head -1 >/dev/null
rc=${PIPESTATUS[0]}
set -e
[ "$rc" = 0 ] || fail "a launch writing into a closed pipe exited $rc, expected 0"
json "$WORK/pipe/summary.json" 'sys.exit(0 if s["ok"] and len(s["per_worker"]) == 2 else 1)' ||
  fail "a launch writing into a closed pipe lost its summary"
[ -s "$WORK/pipe/traces/worker-1.trace.json" ] || fail "a launch writing into a closed pipe lost its traces"
# Under nohup (SIGHUP ignored) a hangup leaves the run alone, as nohup promises.
nohup "$PSBED" launch --model lenet5 --data synthetic --steps 400 --batch 16 --workers 2 --heartbeat-timeout 10 \
  --out "$WORK/nohup" >"$WORK/nohup.out" 2>&1 &
nohup_pid=$!
PIDS+=($nohup_pid)
training "$WORK/nohup/logs/worker-1.log"
kill -HUP "$nohup_pid"
rc=0
wait "$nohup_pid" || rc=$?
[ "$rc" = 0 ] || { tail -5 "$WORK/nohup.out"; fail "a launch under nohup stopped on SIGHUP (exit $rc)"; }
json "$WORK/nohup/summary.json" 'sys.exit(0 if s["ok"] else 1)' || fail "a launch under nohup did not finish its run"
# A sweep whose terminal closes (SIGHUP to its process group): the launch in flight winds down,
# the sweep writes its results and stops, as on Ctrl-C.
setsid "$PSBED" sweep --model lenet5 --data synthetic --workers 1,2 --policy wfbp --steps 100000 --batch 16 \
  --no-plot --out "$WORK/swhup" >"$WORK/swhup.out" 2>&1 &
sweep_pid=$!
PIDS+=($sweep_pid)
training "$WORK/swhup/*/logs/worker-0.log"
sleep 1
kill -HUP -- "-$sweep_pid"
rc=0
wait "$sweep_pid" || rc=$?
[ -s "$WORK/swhup/results.json" ] || { tail -5 "$WORK/swhup.out"; fail "a sweep on SIGHUP wrote no results.json (exit $rc)"; }
grep -q "interrupted" "$WORK/swhup.out" || { tail -5 "$WORK/swhup.out"; fail "the sweep did not say it was interrupted"; }
# A signal sent to the sweep's own pid (a script's `kill PID`, a job manager's SIGTERM, not the
# terminal's whole group) reaches the launch in flight: it winds down and keeps what it measured,
# the sweep writes its results (without that point) and exits 130, and no process of the sweep is
# left behind.
for sig in TERM INT; do
  name="sw$(echo "$sig" | tr 'A-Z' 'a-z')"
  setsid "$PSBED" sweep --model lenet5 --data synthetic --workers 2 --policy wfbp,p3 --steps 100000 --batch 16 \
    --no-plot --out "$WORK/$name" >"$WORK/$name.out" 2>&1 &
  sweep_pid=$!
  PIDS+=($sweep_pid)
  training "$WORK/$name/*/logs/worker-0.log"
  sleep 1
  kill "-$sig" "$sweep_pid"
  for _ in $(seq 1 300); do kill -0 "$sweep_pid" 2>/dev/null || break; sleep 0.1; done
  kill -0 "$sweep_pid" 2>/dev/null && { tail -5 "$WORK/$name.out"; fail "a sweep sent SIG$sig alone still runs 30 s later"; }
  rc=0
  wait "$sweep_pid" || rc=$?
  [ "$rc" = 130 ] || { tail -5 "$WORK/$name.out"; fail "a sweep sent SIG$sig alone exited $rc, expected 130"; }
  # The interrupted point is not among the results: --resume runs it again.
  json "$WORK/$name/results.json" 'sys.exit(0 if s["runs"] == [] else 1)' ||
    fail "a sweep sent SIG$sig alone: results.json counts the interrupted point"
  run=$(ls -d "$WORK/$name"/*/ | head -1)
  check "$run" "interrupted"
  for _ in $(seq 1 50); do pgrep -f -- "$WORK/$name" >/dev/null || break; sleep 0.1; done
  if pgrep -af -- "$WORK/$name"; then fail "a sweep sent SIG$sig alone left the processes above behind"; fi
done
echo "SIGTERM and SIGINT to a sweep alone: the launch in flight wound down with its measurements, the sweep stopped with its results"
echo "hangup and a closed pipe: the run's measurements kept; under nohup the run goes on; a sweep stops with its results"
echo "PASS"
