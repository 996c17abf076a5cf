#!/usr/bin/env bash
# bench coordinator: a real coordinator (a child process) under 200 fake workers that register
# and heartbeat over ZeroMQ; every worker registers, every heartbeat of the window is answered,
# and the coordinator's memory is read. No timing is asserted (docs/results/coordinator-load.md
# has the 1,000-worker figures). Bad counts are refused in one line.
source "$(dirname "$0")/lib.sh"
timeout 60 "$PSBED" bench coordinator --workers 200 --threads 2 --seconds 3 \
  --json "$WORK/bench.json" >"$WORK/bench.out" 2>&1 || { cat "$WORK/bench.out"; fail "bench coordinator failed"; }
grep -q "round trip ms" "$WORK/bench.out" || { cat "$WORK/bench.out"; fail "no round-trip row in the table"; }
python3 - "$WORK/bench.json" <<'PY' || { cat "$WORK/bench.out"; fail "the JSON's fields"; }
import json, sys
r = json.load(open(sys.argv[1]))
assert r["workers"] == 200 and r["threads"] == 2, r
assert 0 < r["registration_s"] <= r["map_s"], r
hb, lat, c = r["heartbeats"], r["latency_ms"], r["coordinator"]
# 200 workers at 2 a second for 3 s: about 1,200, every one answered.
assert hb["sent"] > 600 and hb["answered"] == hb["sent"] and hb["unanswered"] == 0, hb
assert 0 < lat["p50"] <= lat["p99"] <= lat["max"], lat
assert c["rss_start_kib"] > 0 and c["rss_end_kib"] > 0, c
assert c["hwm_kib"] >= c["rss_end_kib"] and c["hwm_kib"] >= c["rss_registered_kib"], c
assert c["per_worker_kib"] > 0 and c["cpu_s"] > 0, c
print("registered in %.3f s; %d heartbeats, p99 %.2f ms; coordinator peak %d KiB"
      % (r["registration_s"], hb["sent"], lat["p99"], c["hwm_kib"]))
PY
for bad in 0 20001; do
  if "$PSBED" bench coordinator --workers "$bad" >"$WORK/bad.out" 2>&1; then
    fail "--workers $bad was taken"
  fi
  [ "$(wc -l <"$WORK/bad.out")" = 1 ] && grep -q -- "--workers" "$WORK/bad.out" ||
    { cat "$WORK/bad.out"; fail "--workers $bad: not one line naming --workers"; }
done
echo "PASS"
