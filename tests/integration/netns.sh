#!/usr/bin/env bash
# `psbed launch --netns`: every node in its own network namespace on a bridge, links shaped by
# tc. A 2-worker run finishes; during it, each link has its tbf qdisc; afterwards no namespace,
# veth or bridge is left, whether the run ended normally, lost a worker to SIGKILL, or was
# interrupted with Ctrl-C (SIGINT).
source "$(dirname "$0")/lib.sh"
need_data
if [ "$(id -u)" != 0 ]; then skip "--netns needs root (network namespaces and tc)"; fi
if ! ip netns add psbed-probe-$$ 2>/dev/null; then skip "cannot create network namespaces here"; fi
ip netns del psbed-probe-$$
links_before=$(ip -o link | wc -l)
ours() { ip netns list | grep -c "^psbed$1-" || true; }
launcher_pid() {
  local pid=""
  for _ in $(seq 1 100); do
    pid=$(pgrep -f -- "^$PSBED launch --netns.*$1" | head -1 || true)
    [ -n "$pid" ] && break
    sleep 0.1
  done
  echo "$pid"
}

# 1. A normal run at 100 Mbit/s, one worker SIGKILLed on the way.
timeout 300 "$PSBED" launch --netns --servers 1 --workers 3 --model lenet5 --data mnist --steps 400 --batch 32 \
  --lr 0.01 --mode async --bandwidth 100mbit --heartbeat-timeout 2 --out "$WORK/run" >"$WORK/run.out" 2>&1 &
PIDS+=($!)
lp=$(launcher_pid "$WORK/run")
[ -n "$lp" ] || fail "the launcher did not start"
victim=$(node_pid worker-2)
[ -n "$victim" ] || { tail "$WORK/run.out"; fail "worker-2 never started"; }
[ "$(ours "$lp")" = 6 ] || fail "expected 6 namespaces (coordinator, server, 3 workers, bridge), got $(ours "$lp")"
# Output captured first: with pipefail, `cmd | grep -q` fails when grep exits before cmd writes all.
q=$(tc -n "psbed$lp-worker-0" qdisc show dev eth0); grep -q "tbf.*rate 100Mbit" <<<"$q" || fail "worker-0's uplink is not shaped"
q=$(tc -n "psbed$lp-br" qdisc show); grep -q "tbf.*rate 100Mbit" <<<"$q" || fail "the bridge side is not shaped"
# The nodes really are apart: worker-0 cannot see the host's loopback services, only 10.213/16.
q=$(ip -n "psbed$lp-worker-0" -o addr show dev eth0); grep -q "inet 10\.213\." <<<"$q" || fail "worker-0 has no 10.213/16 address"
kill -KILL "$victim"
wait "${PIDS[0]}" || true
json "$WORK/run/summary.json" 'sys.exit(0 if s["ok"] else 1)' || { tail -20 "$WORK/run.out"; fail "the run failed"; }
[ "$(json "$WORK/run/summary.json" 'len(s["launch"]["netns"]["namespaces"])')" = 6 ] || fail "summary lacks the namespaces"
[ "$(ours "$lp")" = 0 ] || fail "namespaces left behind: $(ip netns list | grep "psbed$lp-")"
[ "$(ip -o link | wc -l)" = "$links_before" ] || fail "network devices left behind in the host namespace"
echo "normal run with a killed worker: cleaned up"

# 2. Ctrl-C in the middle of a run.
timeout 300 "$PSBED" launch --netns --servers 1 --workers 2 --model lenet5 --data mnist --steps 100000 --batch 32 \
  --mode async --bandwidth 1gbit --out "$WORK/int" >"$WORK/int.out" 2>&1 &
PIDS+=($!)
lp=$(launcher_pid "$WORK/int")
[ -n "$lp" ] || fail "the second launcher did not start"
sleep 2
[ "$(ours "$lp")" -gt 0 ] || fail "no namespaces during the second run"
kill -INT "$lp"
for _ in $(seq 1 150); do kill -0 "$lp" 2>/dev/null || break; sleep 0.1; done
kill -0 "$lp" 2>/dev/null && fail "the launcher did not stop on SIGINT"
[ "$(ours "$lp")" = 0 ] || fail "namespaces left after Ctrl-C: $(ip netns list | grep "psbed$lp-")"
[ "$(ip -o link | wc -l)" = "$links_before" ] || fail "network devices left behind after Ctrl-C"
grep -q interrupted "$WORK/int.out" || fail "the launcher did not say it was interrupted"
echo "Ctrl-C: cleaned up"
echo "PASS"
