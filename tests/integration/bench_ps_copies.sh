#!/usr/bin/env bash
# bench ps counts the payload bytes copied in memory: a pull's arrival is copied once into the
# parameters and a push leaves from the gradient without a copy, so a push + pull round copies
# half the bytes it moves (a shard's copy-on-write would add to it; at most one copy a byte).
# --push-pull rounds (the push answered with the updated part) copy the same.
source "$(dirname "$0")/lib.sh"
for mode in "" --push-pull; do
  timeout 120 "$PSBED" bench ps --models 4 --workers 1 --servers 1 --aggregate-model 4 --min-seconds 0.3s \
    --repeat 1 --partition-bytes 1MiB $mode --json "$WORK/bench.json" >"$WORK/bench.out" 2>&1 ||
    { cat "$WORK/bench.out"; fail "bench ps $mode failed"; }
  grep -q "copies" "$WORK/bench.out" || { cat "$WORK/bench.out"; fail "the table has no copies column"; }
  python3 - "$WORK/bench.json" "$mode" <<'PY' || fail "copies per payload byte ($mode)"
import json, sys
doc = json.load(open(sys.argv[1]))
assert doc["push_pull"] == (sys.argv[2] == "--push-pull"), doc["push_pull"]
rows = [r for r in doc["rows"] if r["kind"] == "single"]
assert rows, "no single-worker row"
c = rows[0]["copies_per_payload_byte"]
assert 0.45 <= c <= 1.0, c
assert rows[0]["psbed_gb_per_s"] > 0, rows[0]
print(f"{sys.argv[2] or 'push, pull'}: copies per payload byte: {c:.3f}")
PY
done
echo "PASS"
