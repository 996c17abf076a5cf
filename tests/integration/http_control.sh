#!/usr/bin/env bash
# The coordinator's HTTP API against a live cluster bound beyond loopback (0.0.0.0, with a
# token): 401 without the token; /api/status fields; /metrics passes `promtool check metrics`;
# bad bodies get 400 naming the field, bad requests 400/405/413 and the server goes on; a POST
# /api/policy switch takes effect and answers with its step; /api/prediction predicts the running configuration from --profile.
source "$(dirname "$0")/lib.sh"
need_data
type -P curl >/dev/null || skip "no curl"
unset PSBED_HTTP_TOKEN
# Beyond loopback without a token: refused at once, in one line.
if timeout 30 "$PSBED" coordinator --http 0.0.0.0:0 --bind "tcp://127.0.0.1:*" >"$WORK/refused.out" 2>&1; then
  fail "a coordinator on 0.0.0.0 without a token started"
fi
grep -q "reachable beyond this host" "$WORK/refused.out" || { cat "$WORK/refused.out"; fail "no reason for the refusal"; }

# Before every node has registered: status says so, a switch is refused with 503.
"$PSBED" coordinator --http :0 --http-file "$WORK/alone.http" --bind "tcp://127.0.0.1:*" --register-timeout 30 \
  >"$WORK/alone.out" 2>&1 &
alone=$!
PIDS+=($alone)
for _ in $(seq 1 100); do [ -s "$WORK/alone.http" ] && break; sleep 0.05; done
alone_url=$(cat "$WORK/alone.http") || fail "the lone coordinator wrote no dashboard address"
case "$alone_url" in http://127.0.0.1:*) ;; *) fail "':0' did not bind loopback: $alone_url" ;; esac
curl -s "${alone_url}api/status" >"$WORK/alone.json"
json "$WORK/alone.json" 'sys.exit(0 if not s["started"] and s["workers"] == [] else 1)' || fail "status before the start"
[ "$(curl -s -o "$WORK/body" -w '%{http_code}' -X POST -d '{"policy":"p3"}' "${alone_url}api/policy")" = 503 ] ||
  { cat "$WORK/body"; fail "a switch before the start was not refused with 503"; }
[ "$(curl -s -o "$WORK/body" -w '%{http_code}' -X POST -d '{"policy":"nope"}' "${alone_url}api/policy")" = 400 ] ||
  fail "a bad body before the start did not get 400"
kill "$alone"

token=secret-$$
cp "$SRC/tests/fixtures/predictor/regression/profile.json" "$WORK/profile.json"  # a recorded lenet5 profile
timeout 150 "$PSBED" launch --servers 2 --workers 2 --model lenet5 --data mnist --steps 100000 --batch 32 \
  --lr 0.02 --http 0.0.0.0:0 --http-token "$token" --profile "$WORK/profile.json" --out "$WORK/run" >"$WORK/run.out" 2>&1 &
PIDS+=($!)
[ -n "$(node_pid worker-1)" ] || { tail -5 "$WORK/run.out"; fail "worker-1 never started"; }
url=$(cat "$WORK/run/logs/coordinator.http")
port=${url##*:}; port=${port%/}
base=http://127.0.0.1:$port
auth=(-H "Authorization: Bearer $token")
# code METHOD PATH [curl args...]: prints the status code, the body goes to $WORK/body
code() { local m=$1 p=$2; shift 2; curl -s -o "$WORK/body" -w '%{http_code}' -X "$m" "$@" "$base$p"; }
expect() { [ "$1" = "$2" ] || { cat "$WORK/body"; fail "$3: expected $2, got $1"; }; }

expect "$(code GET /api/status)" 401 "status without the token"
expect "$(code GET /api/status -H 'Authorization: Bearer wrong')" 401 "status with a wrong token"
expect "$(code GET /metrics)" 401 "metrics without the token"
expect "$(code POST /api/policy -d '{"policy":"p3"}')" 401 "policy without the token"
expect "$(code GET "/api/status?token=$token")" 200 "status with ?token="

# Progress reaches the coordinator every second: wait until both workers have reported twice.
for _ in $(seq 1 50); do
  code GET /api/status "${auth[@]}" >/dev/null
  json "$WORK/body" 'sys.exit(0 if all(w.get("step", 0) > 0 and w.get("bytes_up_per_sec", 0) > 0 for w in s["workers"]) else 1)' && break
  sleep 0.2
done
cp "$WORK/body" "$WORK/status.json"
python3 - "$WORK/status.json" <<'PY' || { cat "$WORK/status.json"; fail "status fields"; }
import json, sys
s = json.load(open(sys.argv[1]))
assert s["started"] and not s["finished"] and s["mode"] == "async" and s["model"] == "lenet5", s
assert s["policy"]["policy"] == "wfbp" and s["policy"]["describe"] == "wfbp", s["policy"]
assert "p3" in s["policies"] and s["step"] > 0 and s["steps"] == 100000
roles = sorted((n["role"], n["id"]) for n in s["nodes"])
assert roles == [("server", 0), ("server", 1), ("worker", 0), ("worker", 1)], roles
for n in s["nodes"]:
    assert n["alive"] and 0 <= n["heartbeat_age_s"] < 3 and n["name"], n
    assert n["role"] != "server" or n["address"].startswith("tcp://"), n
for w in s["workers"]:
    for k in ("steps_per_sec", "images_per_sec", "bytes_up_per_sec", "bytes_down_per_sec", "bytes_pushed", "bytes_pulled"):
        assert w[k] > 0, (k, w)
    assert w["loss"] >= 0 and w["policy"] == "wfbp", w
assert s["totals"]["images_per_sec"] > 0
assert len(s["servers"]) == 2 and all("queue_depth" in v and v["pushes"] > 0 for v in s["servers"]), s["servers"]
print("status: step", s["step"], "images/s %.0f" % s["totals"]["images_per_sec"])
PY

expect "$(code GET /metrics "${auth[@]}")" 200 "metrics"
cp "$WORK/body" "$WORK/metrics.txt"
for m in 'psbed_worker_steps_total{role="worker",node="worker-0"}' 'psbed_worker_pushed_bytes_total{role="worker",node="worker-1"}' \
  'psbed_worker_pulled_bytes_total{role="worker"' 'psbed_step_duration_seconds_bucket{role="worker",node="worker-0",le="+Inf"}' \
  'psbed_server_queued_messages{role="server",node="server-0"}' 'psbed_bad_messages_total{role="server",node="server-1"}' \
  'psbed_node_up{role="server"' 'psbed_policy_info{policy="wfbp"'; do
  grep -qF "$m" "$WORK/metrics.txt" || { cat "$WORK/metrics.txt"; fail "no $m in /metrics"; }
done
if command -v promtool >/dev/null; then
  promtool check metrics <"$WORK/metrics.txt" || fail "promtool check metrics found problems"
  echo "promtool check metrics: clean"
else
  echo "promtool not installed (cluster/install-deps.sh installs Debian's prometheus): format not checked"
fi

# Bad bodies: 400 and a reason naming the field; nothing changes.
expect "$(code POST /api/policy "${auth[@]}" -d 'not json')" 400 "a body that is not JSON"
grep -q "not JSON" "$WORK/body" || fail "no reason for the non-JSON body"
json "$WORK/body" 'sys.exit(0 if s["ok"] is False else 1)' || { cat "$WORK/body"; fail "an error answer without \"ok\": false"; }
expect "$(code POST /api/policy "${auth[@]}" -d '{"policy":"fastest"}')" 400 "an unknown policy"
grep -q "fastest" "$WORK/body" || fail "the unknown policy is not named"
expect "$(code POST /api/policy "${auth[@]}" -d '{"policy":"p3","credit":"lots"}')" 400 "a bad credit"
grep -q "'credit'" "$WORK/body" || fail "the bad credit field is not named"
expect "$(code POST /api/policy "${auth[@]}" -d '{"policy":"p3","slice_params":-5}')" 400 "negative slice_params"
grep -q "'slice_params'" "$WORK/body" || fail "slice_params is not named"
expect "$(code POST /api/policy "${auth[@]}" -d '{"polcy":"p3"}')" 400 "a misspelt field"
grep -q "'polcy'" "$WORK/body" || fail "the unknown field is not named"
expect "$(code POST /api/policy "${auth[@]}" -d '[1,2]')" 400 "a body that is not an object"
# Deep nesting: refused as malformed (quoting or copying such a value recursed once a level and
# overflowed the coordinator's stack: the run died), and a nested value is named, not dumped.
python3 -c 'print("{\"policy\":" + "[" * 100000 + "]" * 100000 + "}")' >"$WORK/deep.json"
expect "$(code POST /api/policy "${auth[@]}" --data-binary @"$WORK/deep.json")" 400 "a body nested 100,000 deep"
grep -q "nested deeper than 64 levels" "$WORK/body" || fail "no reason for refusing the deep body"
expect "$(code POST /api/policy "${auth[@]}" -d '{"policy":[[["p3"]]]}')" 400 "a nested policy name"
grep -q "got an array of 1 item(s)" "$WORK/body" || fail "the nested policy value is not named"
expect "$(code GET /api/status "${auth[@]}")" 200 "status after the deep body"
expect "$(code GET /api/policy "${auth[@]}")" 405 "GET on /api/policy"
expect "$(code POST /api/policy "${auth[@]}" --data-binary @<(head -c 3000000 /dev/zero))" 413 "a 3 MB body"
expect "$(code GET /nowhere "${auth[@]}")" 404 "an unknown path"
# Malformed request lines straight onto the socket: 400, and the server keeps serving.
exec 3<>"/dev/tcp/127.0.0.1/$port"
printf 'GARBAGE\r\n\r\n' >&3
timeout 20 head -1 <&3 >"$WORK/line"; grep -q " 400 " "$WORK/line" || fail "a malformed request line did not get 400"
exec 3>&-
exec 3<>"/dev/tcp/127.0.0.1/$port"
# (in a subshell: a write to a socket the server closed must not end this script by SIGPIPE)
(printf 'GET /api/status HTTP/1.1\r\nX-Big: '; head -c 40000 /dev/zero | tr '\0' a; printf '\r\n\r\n') >&3 2>/dev/null || true
timeout 20 head -1 <&3 >"$WORK/line"; grep -q " 431 " "$WORK/line" || fail "a 40 kB header did not get 431"
exec 3>&-
code GET /api/status "${auth[@]}" >/dev/null
json "$WORK/body" 'sys.exit(0 if s["policy"]["policy"] == "wfbp" and not s["policy_switches"] else 1)' ||
  fail "a refused request changed the policy"

# A switch through HTTP: the answer names the step from which every worker runs p3.
before=$(json "$WORK/body" 'max(w["step"] for w in s["workers"])')
expect "$(code POST /api/policy "${auth[@]}" -H 'Content-Type: application/json' \
  -d '{"policy":"p3","credit":"2MiB","slice_params":20000}')" 200 "the switch to p3"
cat "$WORK/body"
python3 - "$WORK/body" "$before" <<'PY' || fail "switch answer"
import json, sys
r = json.load(open(sys.argv[1])); before = int(sys.argv[2])
assert r["ok"] and r["policy"]["policy"] == "p3" and r["policy"]["credit_bytes"] == 2 << 20, r
assert r["policy"]["slice_params"] == 20000
assert sorted(r["workers"]) == ["worker-0", "worker-1"], r["workers"]
assert r["step"] == max(r["workers"].values()) and min(r["workers"].values()) >= before - 2, (r, before)
PY
for _ in $(seq 1 50); do
  code GET /api/status "${auth[@]}" >/dev/null
  json "$WORK/body" 'sys.exit(0 if all(w.get("policy") == "p3" for w in s["workers"]) else 1)' && break
  sleep 0.2
done
json "$WORK/body" 'sys.exit(0 if s["policy"]["policy"] == "p3" and len(s["policy_switches"]) == 1 and all(w["policy"] == "p3" for w in s["workers"]) else 1)' ||
  { cat "$WORK/body"; fail "status does not show every worker on p3"; }
code GET /metrics "${auth[@]}" >/dev/null
grep -q '^psbed_policy_switches_total 1$' "$WORK/body" || fail "metrics do not count the switch"

expect "$(code GET /api/history "${auth[@]}")" 200 "history"
python3 - "$WORK/body" <<'PY' || fail "history"
import json, sys
h = json.load(open(sys.argv[1]))
t = [x["t_s"] for x in h["samples"]]
assert len(t) >= 2 and t == sorted(t), t
assert any(set(x["workers"]) == {"worker-0", "worker-1"} and x["images_per_sec"] > 0 for x in h["samples"]), h["samples"][-1]
assert len(h["policy_switches"]) == 1
print("history:", len(t), "samples")
PY
expect "$(code GET /api/prediction "${auth[@]}")" 200 "the prediction"
json "$WORK/body" 'sys.exit(0 if s["images_per_sec"] > 0 and s["config"]["workers"] == 2 and s["config"]["policy"]["policy"] == "p3" else 1)' ||
  { cat "$WORK/body"; fail "the prediction is not for the running configuration (2 workers, p3)"; }
# The same figure as `psbed predict` for that configuration with the cluster's own compute (real
# here: each worker's compute takes one of the host's cores, where replayed compute would not).
cp "$WORK/body" "$WORK/dashboard-prediction.json"
read -r mode slice credit partition < <(json "$WORK/body" \
  '" ".join(str(x) for x in (s["config"]["mode"], s["config"]["policy"]["slice_params"], s["config"]["policy"]["credit_bytes"], s["config"]["partition_bytes"]))')
timeout 120 "$PSBED" predict --profile "$WORK/profile.json" --workers 2 --servers 2 --policy p3 --mode "$mode" \
  --slice-params "$slice" --credit "$credit" --partition-bytes "$partition" --compute real --steps 100 \
  --json "$WORK/predict.json" >"$WORK/predict.out" 2>&1 || { cat "$WORK/predict.out"; fail "psbed predict failed"; }
python3 - "$WORK/dashboard-prediction.json" "$WORK/predict.json" <<'PY' || fail "/api/prediction differs from psbed predict"
import json, sys
d = json.load(open(sys.argv[1]))["images_per_sec"]
p = json.load(open(sys.argv[2]))[0]["images_per_sec"]
print(f"prediction: dashboard {d:.1f}, psbed predict {p:.1f} images/s")
assert abs(d - p) <= 1e-6 * p, (d, p)
PY
expect "$(code GET / "${auth[@]}")" 200 "the dashboard"
grep -q "<title>psbed dashboard</title>" "$WORK/body" || fail "/ is not the dashboard"
expect "$(code GET /dashboard.js "${auth[@]}")" 200 "the dashboard's script"
echo "PASS"
