#!/usr/bin/env bash
# Two "hosts" as network namespaces joined by a veth pair (10.77.0.1: coordinator + server,
# 10.77.0.2: worker), every node started by cluster/entrypoint.sh with PSBED_SHAPE=tc, as a
# container with NET_ADMIN would: each end's eth0 gets a tbf qdisc at PSBED_BANDWIDTH, and the
# run's throughput stays under what that rate allows. Needs root and `unshare -n`; skipped
# otherwise. Nothing outside the two namespaces is touched; they vanish with their processes.
source "$(dirname "$0")/lib.sh"
need_data
ENTRY="$SRC/cluster/entrypoint.sh"
if [ "$(id -u)" -ne 0 ] || ! timeout 10 unshare -n true 2>/dev/null || ! command -v nsenter >/dev/null; then
  skip "needs root, unshare -n and nsenter"
fi
BW_MBIT=20
STEPS=40

# The worker's namespace is held open by a sleeping process; the other one is the script below.
unshare -n sleep 120 &
HOLDER=$!
PIDS+=("$HOLDER")
sleep 0.2
timeout 100 unshare -n bash -c '
  set -e
  psbed=$1 entry=$2 work=$3 bw=$4 holder=$5 steps=$6
  ip link set lo up
  ip link add eth0 type veth peer name psbed-peer
  ip link set psbed-peer netns "$holder"
  ip addr add 10.77.0.1/24 dev eth0
  ip link set eth0 up
  nsenter -t "$holder" -n sh -c "ip link set lo up && ip link set psbed-peer name eth0 &&
    ip addr add 10.77.0.2/24 dev eth0 && ip link set eth0 up"
  common=(PATH="$PATH" PSBED_BIN="$psbed" PSBED_RUNS="$work/runs" PSBED_DATA_DIR="$PSBED_DATA_DIR"
    PSBED_STEPS="$steps" PSBED_BATCH=32 PSBED_COORDINATOR=tcp://10.77.0.1:7000 PSBED_CONNECT_TIMEOUT=20
    PSBED_REGISTER_TIMEOUT=30 PSBED_BANDWIDTH="$bw" PSBED_SHAPE=tc)
  env -i "${common[@]}" PSBED_ROLE=coordinator bash "$entry" >"$work/coordinator.log" 2>&1 &
  c=$!
  env -i "${common[@]}" PSBED_ROLE=server PSBED_ADVERTISE=10.77.0.1 PSBED_NAME=server-0 bash "$entry" >"$work/server.log" 2>&1 &
  s=$!
  nsenter -t "$holder" -n env -i "${common[@]}" PSBED_ROLE=worker PSBED_NAME=worker-0 bash "$entry" >"$work/worker.log" 2>&1 &
  w=$!
  rc=0
  wait $c || rc=1
  wait $s || rc=1
  wait $w || rc=1
  tc qdisc show dev eth0 >"$work/tc-server.txt"
  nsenter -t "$holder" -n tc qdisc show dev eth0 >"$work/tc-worker.txt"
  exit $rc
' _ "$PSBED" "$ENTRY" "$WORK" "${BW_MBIT}mbit" "$HOLDER" "$STEPS" >"$WORK/netns.out" 2>&1 ||
  { cat "$WORK/netns.out"; for f in coordinator server worker; do echo "== $f"; tail -n 8 "$WORK/$f.log"; done; fail "the shaped run failed"; }

for side in server worker; do
  grep -q "qdisc tbf .* rate ${BW_MBIT}Mbit" "$WORK/tc-$side.txt" || fail "$side's eth0 has no tbf at ${BW_MBIT}Mbit: $(cat "$WORK/tc-$side.txt")"
  grep -q "shaped eth0 to ${BW_MBIT}mbit" "$WORK/$side.log" || fail "$side's entrypoint did not shape eth0"
done
grep -q -- '--bandwidth' "$WORK/worker.log" && fail "with PSBED_SHAPE=tc the worker was also given --bandwidth"
S="$WORK/runs/latest/summary.json"
[ -f "$S" ] || fail "no summary.json"
json "$S" '"ok" if s["ok"] and s["workers"] == 1 and s["cluster"]["servers"][0]["address"] == "tcp://10.77.0.1:7100" else sys.exit(1)' >/dev/null ||
  fail "summary not ok, or the server did not advertise tcp://10.77.0.1:7100: $(head -c 400 "$S")"
# Each step pulls and pushes every parameter once (float32): at most rate / bytes steps a second
# in each direction, whatever the overlap. 20% for the bucket's burst and measurement edges.
sps=$(json "$S" 's["steps_per_sec"]')
bound=$(json "$S" "$BW_MBIT * 1e6 / 8 / (4 * s['parameters'])")
python3 -c "import sys; sys.exit(0 if 0 < $sps <= 1.2 * $bound else 1)" ||
  fail "shaped to ${BW_MBIT} Mbit/s the run made $sps steps/s; the link allows at most $bound"
echo "two namespaces, tc tbf at ${BW_MBIT} Mbit/s on both eth0: $sps steps/s (the link allows at most $bound); traces: $(ls "$WORK/runs/latest/traces" | tr '\n' ' ')"
echo "PASS"
