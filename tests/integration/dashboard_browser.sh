#!/usr/bin/env bash
# The dashboard in a real browser: headless Chromium opens the page of a running cluster (with a
# token), sees the throughput figures change, switches the policy through the page's form; then
# /api/status must show every worker on the new policy. The screenshot is kept as an artifact
# (build/<preset>/dashboard.png, next to the tests' binary folder).
source "$(dirname "$0")/lib.sh"
need_data
chromium=${CHROMIUM:-/usr/bin/chromium}
[ -x "$chromium" ] || skip "no $chromium (cluster/install-deps.sh installs Debian's chromium)"
command -v node >/dev/null || skip "no node (cluster/install-deps.sh installs it)"
export NODE_PATH="$SRC/.cache/web/node_modules"
[ -f "$NODE_PATH/playwright-core/package.json" ] ||
  skip "no playwright-core in $NODE_PATH (cluster/fetch-web.sh test fetches it)"
artifact="$(cd "$(dirname "$PSBED")/.." && pwd)/dashboard.png"
token=browser-$$
timeout 150 "$PSBED" launch --servers 1 --workers 2 --model lenet5 --data mnist --steps 100000 --batch 32 \
  --lr 0.02 --http 127.0.0.1:0 --http-token "$token" --out "$WORK/run" >"$WORK/run.out" 2>&1 &
PIDS+=($!)
[ -n "$(node_pid worker-1)" ] || { tail -5 "$WORK/run.out"; fail "worker-1 never started"; }
url=$(cat "$WORK/run/logs/coordinator.http")
grep -q "dashboard: $url" "$WORK/run.out" || fail "launch did not print the dashboard address"
start=$(date +%s.%N)
timeout 90 node "$(dirname "$0")/dashboard_browser.cjs" "$url?token=$token" "$artifact" p3 1MiB >"$WORK/browser.out" 2>&1 ||
  { cat "$WORK/browser.out"; fail "the browser run failed"; }
cat "$WORK/browser.out"
python3 - "$WORK/browser.out" <<'PY' || fail "the page did not behave"
import json, sys
r = json.loads(open(sys.argv[1]).read().strip().splitlines()[-1])
assert float(r["first"]) > 0 and float(r["second"]) > 0 and r["first"] != r["second"], r
assert "took effect at step" in r["result"], r["result"]
assert r["policyNow"].startswith("p3"), r["policyNow"]
assert r["charts"] >= 3, "expected three uPlot charts, got %d canvases" % r["charts"]
assert not r["errors"], r["errors"]
PY
# Every worker reports the new policy in its next progress message (about a second).
for _ in $(seq 1 50); do
  curl -sf -H "Authorization: Bearer $token" "${url}api/status" >"$WORK/status.json" || fail "status failed"
  json "$WORK/status.json" 'sys.exit(0 if s["policy"]["policy"] == "p3" and s["policy"]["credit_bytes"] == 1048576 and all(w.get("policy") == "p3" for w in s["workers"]) else 1)' && break
  sleep 0.2
done
json "$WORK/status.json" 'sys.exit(0 if all(w.get("policy") == "p3" for w in s["workers"]) else 1)' ||
  { json "$WORK/status.json" '[w.get("policy") for w in s["workers"]]'; fail "not every worker runs p3"; }
[ -s "$artifact" ] || fail "no screenshot at $artifact"
echo "screenshot: $artifact ($(stat -c %s "$artifact") bytes); browser part took $(python3 -c "import time; print(round(time.time() - $start, 1))") s"
echo "PASS"
