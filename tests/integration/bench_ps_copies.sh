#!/usr/bin/env bash
# bench ps counts the payload bytes copied in memory: a pull's arrival is copied once into the
# parameters and a push leaves from the gradient without a copy, so a push + pull round copies
# half the bytes it moves (a shard's copy-on-write would add to it; at most one copy a byte).
source "$(dirname "$0")/lib.sh"
timeout 120 "$PSBED" bench ps --models 4 --workers 1 --servers 1 --aggregate-model 4 --min-seconds 0.3s \
  --repeat 1 --json "$WORK/bench.json" >"$WORK/bench.out" 2>&1 || { cat "$WORK/bench.out"; fail "bench ps failed"; }
grep -q "copies" "$WORK/bench.out" || { cat "$WORK/bench.out"; fail "the table has no copies column"; }
python3 - "$WORK/bench.json" <<'PY' || fail "copies per payload byte"
import json, sys
rows = [r for r in json.load(open(sys.argv[1]))["rows"] if r["kind"] == "single"]
assert rows, "no single-worker row"
c = rows[0]["copies_per_payload_byte"]
assert 0.45 <= c <= 1.0, c
print(f"copies per payload byte: {c:.3f}")
PY
echo "PASS"
