#!/usr/bin/env bash
# The coordinator's /metrics as Prometheus users expect it, on a live cluster (2 shards, 2
# workers, bound beyond loopback with a token): `promtool check metrics` is clean; the families
# are exactly the ones listed below (a rename shows here first, and the readers named in
# docs/dashboard-and-api.md follow); counters end in _total with the unit before it and no rate
# is a gauge; psbed_build_info names this build's version and the process_* families are there;
# /healthz answers without the token while /metrics needs it. Then the files under
# cluster/monitoring/: the scrape config passes `promtool check config`, and every metric the
# Grafana dashboard queries is one /metrics serves.
source "$(dirname "$0")/lib.sh"
need_data
type -P curl >/dev/null || skip "no curl"
type -P promtool >/dev/null || skip "no promtool (cluster/install-deps.sh test installs Debian's prometheus)"
unset PSBED_HTTP_TOKEN

# Every family, with its type. Workers' and shards' families appear once they have reported.
EXPECTED='psbed_bad_messages_total counter
psbed_build_info gauge
psbed_dropped_unread_messages_total counter
psbed_node_heartbeat_age_seconds gauge
psbed_node_up gauge
psbed_policy_info gauge
psbed_policy_switches_total counter
psbed_progress_age_seconds gauge
psbed_run_steps gauge
psbed_server_bad_messages_total counter
psbed_server_pulls_total counter
psbed_server_pushes_total counter
psbed_server_queued_messages gauge
psbed_stalled gauge
psbed_step_duration_seconds histogram
psbed_worker_images_total counter
psbed_worker_loss gauge
psbed_worker_pulled_bytes_total counter
psbed_worker_pushed_bytes_total counter
psbed_worker_steps_total counter
process_cpu_seconds_total counter
process_max_fds gauge
process_open_fds gauge
process_resident_memory_bytes gauge
process_start_time_seconds gauge
process_virtual_memory_bytes gauge'

token=metrics-$$
timeout 120 "$PSBED" launch --servers 2 --workers 2 --model lenet5 --data mnist --steps 100000 --batch 32 \
  --lr 0.02 --http 0.0.0.0:0 --http-token "$token" --out "$WORK/run" >"$WORK/run.out" 2>&1 &
PIDS+=($!)
[ -n "$(node_pid worker-1)" ] || { tail -5 "$WORK/run.out"; fail "worker-1 never started"; }
url=$(cat "$WORK/run/logs/coordinator.http")
port=${url##*:}; port=${port%/}
base=http://127.0.0.1:$port
# code PATH [curl args...]: the status code; the body goes to $WORK/body
code() { local p=$1; shift; curl -s -o "$WORK/body" -w '%{http_code}' "$@" "$base$p"; }

[ "$(code /healthz)" = 200 ] || fail "/healthz without the token: expected 200, got $(cat "$WORK/body")"
[ "$(cat "$WORK/body")" = ok ] || fail "/healthz answered '$(cat "$WORK/body")', expected ok"
[ "$(code /metrics)" = 401 ] || fail "/metrics without the token: expected 401"
[ "$(code /api/status)" = 401 ] || fail "/api/status without the token: expected 401"

# Wait until both workers and both shards have reported (their families appear with them).
for _ in $(seq 1 100); do
  code /metrics -H "Authorization: Bearer $token" >/dev/null
  [ "$(grep -c '^psbed_worker_images_total{' "$WORK/body")" = 2 ] &&
    [ "$(grep -c '^psbed_server_pushes_total{' "$WORK/body")" = 2 ] && break
  sleep 0.2
done
cp "$WORK/body" "$WORK/metrics.txt"
promtool check metrics <"$WORK/metrics.txt" || fail "promtool check metrics found problems"
echo "promtool check metrics: clean"

EXPECTED=$(LC_ALL=C sort <<<"$EXPECTED")
got=$(awk '/^# TYPE / {print $3, $4}' "$WORK/metrics.txt" | LC_ALL=C sort)
if [ "$got" != "$EXPECTED" ]; then
  diff <(echo "$EXPECTED") <(echo "$got") >&2 || true
  fail "/metrics families differ from the list (< expected, > served)"
fi
echo "families: $(echo "$got" | wc -l), as listed"

python3 - "$WORK/metrics.txt" <<'PY' || fail "a family breaks the naming conventions"
import re, sys
types = dict(l.split()[2:4] for l in open(sys.argv[1]) if l.startswith("# TYPE "))
bad = []
units = ("bytes", "seconds", "messages", "images", "steps", "pushes", "pulls", "switches")
for name, kind in types.items():
    if kind == "counter" and not name.endswith("_total"):
        bad.append(f"{name}: a counter must end in _total")
    if kind != "counter" and name.endswith("_total"):
        bad.append(f"{name}: only counters end in _total")
    if re.search(r"per_sec|per_second|_rate\b", name):
        bad.append(f"{name}: a rate is rate() of a counter, not a family")
    if kind == "counter" and not name.startswith("process_"):
        stem = name[: -len("_total")]
        if not stem.endswith(units):
            bad.append(f"{name}: no unit before _total (one of {', '.join(units)})")
    for u in ("bytes", "seconds"):
        if f"_{u}_" in name and not name.endswith((f"_{u}_total", f"_{u}")):
            bad.append(f"{name}: the unit {u} must come last (before _total)")
for b in bad:
    print("metrics:", b, file=sys.stderr)
sys.exit(1 if bad else 0)
PY
want_version=$("$PSBED" --version | awk '{print $2}')
grep -q "^psbed_build_info{version=\"$want_version\"} 1$" "$WORK/metrics.txt" ||
  fail "psbed_build_info does not name version $want_version"
# Counters count: the images of a worker are its steps times the batch.
python3 - "$WORK/metrics.txt" <<'PY' || fail "psbed_worker_images_total is not steps x batch"
import re, sys
text = open(sys.argv[1]).read()
def val(name, node):
    return float(re.search(rf'^{name}{{role="worker",node="{node}"}} (\S+)$', text, re.M).group(1))
for node in ("worker-0", "worker-1"):
    steps, images = val("psbed_worker_steps_total", node), val("psbed_worker_images_total", node)
    assert steps > 0 and images == 32 * steps, (node, steps, images)
PY

# The monitoring files: the scrape config (its token file put where promtool looks), and the
# dashboard's queries against the families served.
MON="$SRC/cluster/monitoring"
echo "$token" >"$WORK/token"
sed "s#/prometheus/psbed-token#$WORK/token#" "$MON/prometheus.yml" >"$WORK/prometheus.yml"
promtool check config "$WORK/prometheus.yml" >"$WORK/config.out" 2>&1 ||
  { cat "$WORK/config.out"; fail "promtool check config rejects cluster/monitoring/prometheus.yml"; }
echo "promtool check config: clean"
python3 - "$MON/grafana/dashboards/psbed.json" "$WORK/metrics.txt" <<'PY' || fail "the Grafana dashboard queries families /metrics does not serve"
import json, re, sys
dash = json.load(open(sys.argv[1]))
served = {l.split()[2] for l in open(sys.argv[2]) if l.startswith("# TYPE ")}
series = served | {n + s for n in served for s in ("_bucket", "_sum", "_count")}
exprs = [t["expr"] for p in dash["panels"] for t in p.get("targets", [])]
assert exprs, "no queries"
missing = set()
for e in exprs:
    for name in re.findall(r"\b((?:psbed|process)_[a-z_]+)", e):
        if name not in series:
            missing.add(name)
for m in sorted(missing):
    print(f"dashboard: {m} is not served by /metrics", file=sys.stderr)
assert all(p["datasource"]["uid"] == "psbed-prometheus" for p in dash["panels"])
print(f"dashboard: {len(exprs)} queries over served families")
sys.exit(1 if missing else 0)
PY
