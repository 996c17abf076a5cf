#!/usr/bin/env bash
# cuBLAS is opened when the GPU backend first needs it, not linked: a psbed process that never
# asks for the GPU (here a coordinator, as every shard and CPU worker) does not map it, and the
# binary does not name it among the libraries it needs.
source "$(dirname "$0")/lib.sh"
if ldd "$PSBED" | grep -q libcublas; then
  fail "psbed links cuBLAS: $(ldd "$PSBED" | grep libcublas | tr -s ' \t' ' ')"
fi
"$PSBED" coordinator --bind "tcp://127.0.0.1:*" --register-timeout 30 >"$WORK/coordinator.out" 2>&1 &
pid=$!
PIDS+=("$pid")
for _ in $(seq 1 100); do grep -q "listening\|waiting for" "$WORK/coordinator.out" && break; sleep 0.05; done
kill -0 "$pid" 2>/dev/null || { cat "$WORK/coordinator.out"; fail "the coordinator did not start"; }
if grep -q libcublas "/proc/$pid/maps"; then
  fail "a coordinator mapped cuBLAS: $(grep -c libcublas "/proc/$pid/maps") mappings"
fi
rss_kib=$(awk '/^VmRSS/ {print $2}' "/proc/$pid/status")
echo "coordinator: no cuBLAS mapped, resident ${rss_kib} KiB"
# Asking for the GPU without a device: one line naming why, exit status 2 (where a device exists
# this is the GPU tests' business).
if ! grep -q . <(nvidia-smi -L 2>/dev/null); then
  set +e
  timeout 60 "$PSBED" train --model mlp --data synthetic --steps 1 --device gpu >"$WORK/gpu.out" 2>&1
  rc=$?
  set -e
  [ "$rc" = 2 ] || { cat "$WORK/gpu.out"; fail "--device gpu without a device exited $rc, expected 2"; }
  grep -q "no CUDA device available" "$WORK/gpu.out" || { cat "$WORK/gpu.out"; fail "no reason given"; }
fi
echo "PASS"
