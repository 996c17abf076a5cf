#!/usr/bin/env bash
# cluster/entrypoint.sh itself, started as plain processes on loopback with the environment
# docker-compose.yml gives each service (only the addresses, ports, folder and run length
# changed for one host): coordinator, server and worker roles train lenet5 to a summary.json,
# once with the compose defaults (PSBED_WORKERS/SERVERS=auto, counted through DNS) and once with
# 2 servers x 2 workers in bsp under p3; the health command; refused settings (one line naming
# the variable, non-zero exit); the flags each setting maps to (PSBED_DRY_RUN=1); the server's
# advertised address; the dashboard (PSBED_HTTP, PSBED_HTTP_TOKEN), its token never printed.
source "$(dirname "$0")/lib.sh"
need_data
ENTRY="$SRC/cluster/entrypoint.sh"
# Roles that get as far as making their run folder (PSBED_RUNS defaults to runs/ in the working
# folder) make it here, not in the folder ctest runs from.
cd "$WORK"
PY=python3
$PY -c 'import yaml' 2>/dev/null || PY=/usr/bin/python3
$PY -c 'import yaml' 2>/dev/null || fail "no python3 with PyYAML: run cluster/install-deps.sh (Debian package python3-yaml)"
command -v docker-compose >/dev/null 2>&1 || fail "docker-compose not found: run cluster/install-deps.sh"

# The environment of each compose service, as `docker-compose config` resolves it with nothing set.
env -i PATH="$PATH" HOME="$WORK" docker-compose -f "$SRC/docker-compose.yml" config >"$WORK/compose.yml" ||
  fail "docker-compose config failed"
compose_env() {  # SERVICE -> export lines
  $PY - "$WORK/compose.yml" "$1" <<'EOF'
import shlex, sys, yaml
env = yaml.safe_load(open(sys.argv[1]))["services"][sys.argv[2]]["environment"]
for k, v in env.items():
    print(f"export {k}={shlex.quote('' if v is None else str(v))}")
EOF
}
free_port() { $PY -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])'; }

# Loopback stand-ins for what compose's network provides: addresses, ports, the shared folder.
# A short run; timeouts bounded so that a failure ends the test instead of hanging it.
entry_env() {  # SERVICE VAR=VALUE...: prints nothing, sets the environment of this (sub)shell
  local svc=$1
  shift
  eval "$(compose_env "$svc")"
  export PSBED_BIN="$PSBED" PSBED_RUNS="$WORK/runs" PSBED_BIND_HOST=127.0.0.1 PSBED_PORT="$CPORT" \
    PSBED_COORDINATOR="tcp://127.0.0.1:$CPORT" PSBED_ADVERTISE=127.0.0.1 PSBED_STEPS=25 PSBED_BATCH=32 \
    PSBED_CONNECT_TIMEOUT=30 PSBED_REGISTER_TIMEOUT=40 PSBED_HEARTBEAT_TIMEOUT=10
  # shellcheck disable=SC2163  # the arguments are VAR=VALUE pairs
  [ "$#" -eq 0 ] || export "$@"
}
start() {  # NAME SERVICE VAR=VALUE...: the entrypoint in the background, its log in $WORK/NAME.log
  local name=$1
  shift
  (entry_env "$@" && exec timeout 120 bash "$ENTRY") >"$WORK/$name.log" 2>&1 &
  PIDS+=($!)
  eval "PID_${name//-/_}=$!"
}
finish() {  # NAME: waits (bounded by the timeout above) and checks the exit status
  local var="PID_${1//-/_}" rc=0
  wait "${!var}" || rc=$?
  [ "$rc" -eq 0 ] || { tail -n 20 "$WORK/$1.log" >&2; fail "$1 exited with status $rc"; }
}
health() {  # SERVICE VAR=VALUE...: exit status of `entrypoint.sh health`
  (entry_env "$@" && exec bash "$ENTRY" health) 2>>"$WORK/health.err"
}
wait_healthy() {  # SERVICE VAR=VALUE...: polls health for up to 20 s
  for _ in $(seq 1 100); do health "$@" && return 0; sleep 0.2; done
  fail "$1 never became healthy: $(tail -n1 "$WORK/health.err")"
}
check_run() {  # DIR WORKERS SERVERS MODE POLICY
  local dir=$1
  [ -f "$dir/summary.json" ] || fail "no summary.json in $dir"
  json "$dir/summary.json" "'ok' if s['ok'] and s['workers'] == $2 and s['servers'] == $3 and len(s['per_worker']) == $2 \
    and s['mode'] == '$4' and s['policy'] == '$5' else sys.exit(1)" >/dev/null ||
    fail "summary in $dir is not ok with $2 workers, $3 servers, mode $4, policy $5: $(head -c 400 "$dir/summary.json")"
  local n
  n=$(ls "$dir/traces" | wc -l)
  [ "$n" -eq $(($2 + $3)) ] || fail "expected $(($2 + $3)) traces in $dir/traces, found $n: $(ls "$dir/traces")"
  echo "run $dir: $2 worker(s) x $3 server(s), $4, $5: $(json "$dir/summary.json" 's["images_per_sec"]') images/s, traces: $(ls "$dir/traces" | tr '\n' ' ')"
}

# --- refused settings: non-zero, one line on stderr naming the variable, nothing started ---
refuse() {  # PATTERN VAR=VALUE...
  local pattern=$1 rc=0
  shift
  env -i PATH="$PATH" PSBED_BIN="$PSBED" "$@" bash "$ENTRY" >"$WORK/refuse.out" 2>"$WORK/refuse.err" || rc=$?
  [ "$rc" -ne 0 ] || fail "entrypoint accepted $*"
  [ "$(wc -l <"$WORK/refuse.err")" -eq 1 ] || { cat "$WORK/refuse.err"; fail "entrypoint with $*: expected one line on stderr"; }
  grep -q -- "$pattern" "$WORK/refuse.err" || fail "entrypoint with $*: '$(cat "$WORK/refuse.err")' does not name $pattern"
  [ ! -s "$WORK/refuse.out" ] || fail "entrypoint with $* printed on stdout: $(cat "$WORK/refuse.out")"
  echo "refused (status $rc): $(cat "$WORK/refuse.err")"
}
refuse "PSBED_ROLE is not set"
# The image's non-root user and a runs folder the host made for root: refused, naming the fix.
if [ "$(id -u)" -eq 0 ] && type -P setpriv >/dev/null && setpriv --reuid 65534 --regid 65534 --clear-groups test -r "$ENTRY"; then
  rootonly=$(mktemp -d /tmp/psbed-rootonly.XXXXXX)
  chmod 755 "$rootonly" && mkdir -m 755 "$rootonly/runs"
  rc=0
  (cd / && env -i PATH="$PATH" PSBED_BIN="$PSBED" PSBED_ROLE=coordinator PSBED_RUNS="$rootonly/runs" \
    setpriv --reuid 65534 --regid 65534 --clear-groups bash "$ENTRY") 2>"$WORK/unwritable.err" || rc=$?
  rm -rf "$rootonly"
  [ "$rc" -eq 2 ] || { cat "$WORK/unwritable.err"; fail "an unwritable runs folder: status $rc, expected 2"; }
  grep -q "PSBED_RUNS: .*/runs is not writable by uid 65534 .*PSBED_USER" "$WORK/unwritable.err" ||
    fail "an unwritable runs folder: '$(cat "$WORK/unwritable.err")' does not say so"
  echo "refused: $(cat "$WORK/unwritable.err")"
fi
refuse "PSBED_ROLE='trainer' is not a role" PSBED_ROLE=trainer
refuse "PSBED_COORDINATOR is not set" PSBED_ROLE=worker
refuse "PSBED_COORDINATOR is not set" PSBED_ROLE=server
refuse "PSBED_COORDINATOR='tcp://a b:1' is not an address" PSBED_ROLE=worker "PSBED_COORDINATOR=tcp://a b:1"
refuse "PSBED_POLICY='fastest' is not a transmission policy" PSBED_ROLE=coordinator PSBED_POLICY=fastest
refuse "PSBED_MODE='ssp' is not a consistency mode" PSBED_ROLE=coordinator PSBED_MODE=ssp
refuse "PSBED_WOKERS is not a variable" PSBED_ROLE=coordinator PSBED_WOKERS=3
refuse "PSBED_WORKERS='many' is not a whole number" PSBED_ROLE=coordinator PSBED_WORKERS=many
refuse "PSBED_STEPS='ten' is not a whole number" PSBED_ROLE=coordinator PSBED_STEPS=ten
refuse "PSBED_BANDWIDTH='fast' is not a rate" PSBED_ROLE=worker PSBED_COORDINATOR=c PSBED_BANDWIDTH=fast
refuse "unknown unit 'mb'" PSBED_ROLE=worker PSBED_COORDINATOR=c PSBED_BANDWIDTH=5mb
refuse "has no unit" PSBED_ROLE=worker PSBED_COORDINATOR=c PSBED_BANDWIDTH=100
refuse "PSBED_LATENCY='200' is not a duration" PSBED_ROLE=worker PSBED_COORDINATOR=c PSBED_LATENCY=200
refuse "PSBED_SHAPE=tc needs PSBED_BANDWIDTH" PSBED_ROLE=worker PSBED_COORDINATOR=c PSBED_SHAPE=tc
refuse "PSBED_SHAPE='netem' is not a shaping method" PSBED_ROLE=worker PSBED_COORDINATOR=c PSBED_SHAPE=netem
refuse "PSBED_BIN='/nonexistent/psbed' is not an executable" PSBED_ROLE=coordinator PSBED_BIN=/nonexistent/psbed
refuse "PSBED_RUN='../x' is not a folder name" PSBED_ROLE=coordinator PSBED_RUN=../x
refuse "PSBED_WORKERS='auto' is not a whole number" PSBED_ROLE=predict PSBED_WORKERS=auto
refuse "PSBED_HTTP is for the coordinator only" PSBED_ROLE=worker PSBED_COORDINATOR=c PSBED_HTTP=0.0.0.0:8080
refuse "PSBED_HTTP is for the coordinator only" PSBED_ROLE=server PSBED_COORDINATOR=c PSBED_HTTP=:8080
refuse "PSBED_HTTP='0.0.0.0:8080' is reachable from other hosts and needs PSBED_HTTP_TOKEN" PSBED_ROLE=coordinator PSBED_HTTP=0.0.0.0:8080
refuse "PSBED_HTTP='http://c:80' is not an address" PSBED_ROLE=coordinator PSBED_HTTP=http://c:80
refuse "PSBED_SERVER_PORT=\* with PSBED_BIND_HOST=0.0.0.0 would give workers" PSBED_ROLE=server PSBED_COORDINATOR=c "PSBED_SERVER_PORT=*"
refuse "PSBED_ADVERTISE='tcp://h:7100' is not a host name" PSBED_ROLE=server PSBED_COORDINATOR=c PSBED_ADVERTISE=tcp://h:7100
refuse "PSBED_ADVERTISE='0.0.0.0' is no address workers can reach" PSBED_ROLE=server PSBED_COORDINATOR=c PSBED_ADVERTISE=0.0.0.0
refuse "PSBED_PUSH_PULL='yes' is not 0 or 1" PSBED_ROLE=coordinator PSBED_PUSH_PULL=yes
refuse "PSBED_CONNECTIONS='9' is not a whole number from 1 to 8" PSBED_ROLE=server PSBED_COORDINATOR=c PSBED_CONNECTIONS=9
# Discovery logs its progress first; the refusal is its last line.
rc=0
env -i PATH="$PATH" PSBED_BIN="$PSBED" PSBED_ROLE=coordinator PSBED_WORKERS=auto PSBED_DISCOVER_TIMEOUT=1 \
  PSBED_WORKER_SERVICE=psbed-no-such-service.invalid bash "$ENTRY" 2>"$WORK/refuse.err" || rc=$?
[ "$rc" -ne 0 ] || fail "PSBED_WORKERS=auto with no worker service started a coordinator"
tail -n1 "$WORK/refuse.err" | grep -q "PSBED_WORKERS=auto: no worker container answered as 'psbed-no-such-service.invalid'" ||
  fail "PSBED_WORKERS=auto with no worker service: $(cat "$WORK/refuse.err")"
echo "refused (status $rc): $(tail -n1 "$WORK/refuse.err")"

# --- what each setting maps to ---
dry() { env -i PATH="$PATH" PSBED_BIN="$PSBED" PSBED_DRY_RUN=1 "$@" bash "$ENTRY" 2>/dev/null; }
out=$(dry PSBED_ROLE=worker PSBED_COORDINATOR=coordinator PSBED_SHAPE=tc PSBED_BANDWIDTH=2.5gbit PSBED_LATENCY=200us)
grep -qx 'tc qdisc replace dev eth0 root tbf rate 2500000000bit burst 1250000 latency 100ms' <<<"$out" ||
  fail "PSBED_SHAPE=tc: expected a tbf command at 2500000000bit, got: $out"
grep -q -- '--bandwidth' <<<"$out" && fail "PSBED_SHAPE=tc still passed --bandwidth to psbed: $out"
grep -q -- '--latency 200us' <<<"$out" || fail "PSBED_SHAPE=tc dropped --latency: $out"
grep -q -- '--coordinator tcp://coordinator:7000' <<<"$out" || fail "PSBED_COORDINATOR=coordinator did not default to port 7000: $out"
out=$(dry PSBED_ROLE=server PSBED_COORDINATOR=tcp://c:7001 PSBED_BANDWIDTH=100mbit PSBED_ADVERTISE=10.0.0.5)
grep -q -- '--bandwidth 100mbit' <<<"$out" || fail "PSBED_SHAPE=emulate: expected --bandwidth 100mbit: $out"
grep -q -- '--bind tcp://0.0.0.0:7100 --advertise tcp://10.0.0.5:7100' <<<"$out" || fail "server bind/advertise: $out"
grep -q '^tc ' <<<"$out" && fail "PSBED_SHAPE=emulate ran tc: $out"
out=$(dry PSBED_ROLE=worker PSBED_COORDINATOR=c JOB_COMPLETION_INDEX=3)
grep -q -- '--name worker-3 ' <<<"$out" || fail "an Indexed Job's worker 3 is not named worker-3: $out"
out=$(dry PSBED_ROLE=coordinator PSBED_WORKERS=6 PSBED_SERVERS=2 PSBED_MODE=ssp:3 PSBED_POLICY=bytescheduler PSBED_CREDIT=2MiB PSBED_RUNS=/r PSBED_RUN=x)
grep -q -- '--servers 2 --workers 6 .*--mode ssp:3 --policy bytescheduler --summary /r/x/summary.json' <<<"$out" ||
  fail "coordinator flags: $out"
grep -q -- '--credit 2MiB' <<<"$out" || fail "PSBED_CREDIT not passed: $out"
grep -q -- '--connections\|--push-pull' <<<"$out" && fail "connections or push-pull passed unasked: $out"
out=$(dry PSBED_ROLE=coordinator PSBED_WORKERS=2 PSBED_SERVERS=1 PSBED_PUSH_PULL=1 PSBED_CONNECTIONS=2)
grep -q -- '--connections 2 --push-pull' <<<"$out" || fail "PSBED_CONNECTIONS and PSBED_PUSH_PULL: $out"
out=$(dry PSBED_ROLE=server PSBED_COORDINATOR=c PSBED_CONNECTIONS=2 PSBED_ADVERTISE=10.0.0.5)
grep -q -- '--io-threads 2' <<<"$out" || fail "PSBED_CONNECTIONS did not give the server its I/O threads: $out"
# The predict role predicts the measured run's settings, each one in the file's name.
out=$(dry PSBED_ROLE=predict PSBED_WORKERS=8 PSBED_SERVERS=2 PSBED_POLICY=p3 PSBED_MODE=bsp PSBED_BANDWIDTH=1gbit \
  PSBED_LATENCY=200us PSBED_SLICE_PARAMS=20000 PSBED_CREDIT=1MiB PSBED_PARTITION_BYTES=2MiB PSBED_RUNS=/r PSBED_RUN=x)
grep -q -- "predict --profile /r/x/profile.json --workers 8 --servers 2 --policy p3 --mode bsp --json /r/x/predict-8w2s-p3-bsp-bandwidth1gbit-latency200us-partition-bytes2MiB-slice-params20000-credit1MiB.json --bandwidth 1gbit --latency 200us --partition-bytes 2MiB --slice-params 20000 --credit 1MiB" <<<"$out" ||
  fail "predict role: expected every link and policy setting passed on and in the file name: $out"
# The server's advertised address: what it binds when that is one address; for 0.0.0.0, this
# host's first non-loopback IPv4 (a hostname that is an IP literal, in a UTS namespace of its
# own, stands for a container's); * only with one bind address (psbed gives the bound endpoint).
out=$(dry PSBED_ROLE=server PSBED_COORDINATOR=c PSBED_BIND_HOST=10.0.0.7)
grep -q -- '--bind tcp://10.0.0.7:7100 --advertise tcp://10.0.0.7:7100' <<<"$out" || fail "server bound to 10.0.0.7: expected it advertised: $out"
out=$(dry PSBED_ROLE=server PSBED_COORDINATOR=c PSBED_BIND_HOST=127.0.0.1 "PSBED_SERVER_PORT=*")
grep -q -- '--bind tcp://127.0.0.1:\\\* ' <<<"$out" || fail "server on 127.0.0.1:*: expected --bind tcp://127.0.0.1:*: $out"
grep -q -- '--advertise' <<<"$out" && fail "server on 127.0.0.1:*: --advertise cannot name the port it will get: $out"
hostip=$(getent ahostsv4 "$(cat /proc/sys/kernel/hostname)" 2>/dev/null | awk '$1 !~ /^127\./ {print $1; exit}' || true)
rc=0
out=$(env -i PATH="$PATH" PSBED_BIN="$PSBED" PSBED_DRY_RUN=1 PSBED_ROLE=server PSBED_COORDINATOR=c bash "$ENTRY" 2>"$WORK/adv.err") || rc=$?
if [ -n "$hostip" ]; then
  grep -q -- "--bind tcp://0.0.0.0:7100 --advertise tcp://$hostip:7100" <<<"$out" || fail "server on 0.0.0.0: expected --advertise tcp://$hostip:7100: $out $(cat "$WORK/adv.err")"
else
  [ "$rc" -eq 2 ] && [ "$(wc -l <"$WORK/adv.err")" -eq 1 ] && grep -q "PSBED_ADVERTISE is not set and this host's name .* has no IPv4 address other than loopback" "$WORK/adv.err" ||
    fail "server on 0.0.0.0 on a host whose name is only loopback: expected one line asking for PSBED_ADVERTISE, got status $rc: $out $(cat "$WORK/adv.err")"
fi
if [ "$(id -u)" -eq 0 ] && timeout 10 unshare -u true 2>/dev/null; then
  out=$(timeout 30 unshare -u bash -c 'hostname 10.1.2.3 && env -i PATH="$PATH" PSBED_BIN="$1" PSBED_DRY_RUN=1 PSBED_ROLE=server \
    PSBED_COORDINATOR=c bash "$2" 2>/dev/null' _ "$PSBED" "$ENTRY") || true
  grep -q -- '--bind tcp://0.0.0.0:7100 --advertise tcp://10.1.2.3:7100' <<<"$out" ||
    fail "server on 0.0.0.0 with hostname 10.1.2.3: expected --advertise tcp://10.1.2.3:7100: $out"
  echo "server advertise: bind address, hostname's IPv4 (UTS namespace), refusals"
else
  echo "server advertise: bind address, refusals (the hostname case skipped: needs root and unshare -u)"
fi

# The dashboard: PSBED_HTTP becomes --http; the token goes to psbed in its environment and is
# never printed (stdout or stderr), nor one given as --http-token in PSBED_EXTRA_ARGS.
TOKEN=psbed-test-token-$$-x7q
both() { env -i PATH="$PATH" PSBED_BIN="$PSBED" PSBED_DRY_RUN=1 "$@" bash "$ENTRY" 2>&1; }
out=$(both PSBED_ROLE=coordinator PSBED_HTTP=0.0.0.0:8080 PSBED_HTTP_TOKEN="$TOKEN")
grep -q -- ' --http 0.0.0.0:8080 ' <<<"$out" || fail "PSBED_HTTP=0.0.0.0:8080: expected --http 0.0.0.0:8080: $out"
grep -q -- "$TOKEN" <<<"$out" && fail "the token of PSBED_HTTP_TOKEN was printed: $out"
out=$(both PSBED_ROLE=coordinator PSBED_HTTP=0.0.0.0:8080 "PSBED_EXTRA_ARGS=--http-token $TOKEN --progress-every 1")
grep -q -- '--http-token \\\*\\\*\\\* ' <<<"$out" || fail "--http-token in PSBED_EXTRA_ARGS: expected it shown as ***: $out"
grep -q -- "$TOKEN" <<<"$out" && fail "the token of --http-token in PSBED_EXTRA_ARGS was printed: $out"
# PSBED_EXTRA_ARGS is split on spaces, not expanded as file names.
mkdir -p "$WORK/glob" && touch "$WORK/glob/aa" "$WORK/glob/ab"
out=$(cd "$WORK/glob" && dry PSBED_ROLE=coordinator "PSBED_EXTRA_ARGS=--log-file a*")
grep -q -- '--log-file a\\\*' <<<"$out" || fail "PSBED_EXTRA_ARGS='--log-file a*' was expanded as file names: $out"
# A stop while the entrypoint itself runs (bash as PID 1 ignores SIGTERM unless it traps it): it
# ends at once, not after the grace period.
# (As PID 1 of its own PID namespace, where one can be made.)
if unshare -p -f --kill-child true 2>/dev/null; then
  unshare -p -f --kill-child env -i PATH="$PATH" PSBED_BIN="$PSBED" PSBED_ROLE=worker \
    PSBED_COORDINATOR=nosuchhost.invalid bash "$ENTRY" >"$WORK/wait.out" 2>&1 &
  ns=$!
  PIDS+=($ns)
  pid1=""
  for _ in $(seq 1 50); do pid1=$(pgrep -P "$ns" | head -1 || true); [ -n "$pid1" ] && break; sleep 0.1; done
  [ -n "$pid1" ] || fail "the entrypoint did not start in its PID namespace"
  sleep 1
  kill -TERM "$pid1"
  for _ in $(seq 1 40); do kill -0 "$pid1" 2>/dev/null || break; sleep 0.1; done
  if kill -0 "$pid1" 2>/dev/null; then cat "$WORK/wait.out"; fail "the entrypoint as PID 1, waiting for its coordinator, ignored SIGTERM"; fi
fi
out=$(both PSBED_ROLE=coordinator "PSBED_EXTRA_ARGS=--http-token=$TOKEN")
grep -q -- "$TOKEN" <<<"$out" && fail "the token of --http-token=... in PSBED_EXTRA_ARGS was printed: $out"
out=$(both PSBED_ROLE=coordinator PSBED_HTTP=:8080)
grep -q -- ' --http :8080 ' <<<"$out" || fail "PSBED_HTTP=:8080 (loopback, no token): expected --http :8080: $out"
out=$(both PSBED_ROLE=worker PSBED_COORDINATOR=c PSBED_HTTP_TOKEN="$TOKEN")
grep -q -- '--http' <<<"$out" && fail "a worker got an --http flag: $out"
grep -q -- "$TOKEN" <<<"$out" && fail "a worker printed the token: $out"
echo "dry runs: flags as expected (tc vs emulate, server address, worker naming, coordinator and predict settings, dashboard)"

# PSBED_SHAPE=tc for real: a device tc cannot shape is refused in one line (nothing changes on
# this host); in a network namespace of its own, a veth named eth0 gets the tbf qdisc.
rc=0
env -i PATH="$PATH" PSBED_BIN="$PSBED" PSBED_ROLE=worker PSBED_COORDINATOR=tcp://127.0.0.1:9 PSBED_SHAPE=tc \
  PSBED_BANDWIDTH=100mbit PSBED_TC_DEV=psbed-nosuch0 bash "$ENTRY" 2>"$WORK/tc.err" || rc=$?
[ "$rc" -ne 0 ] && [ "$(wc -l <"$WORK/tc.err")" -eq 1 ] && grep -q "PSBED_SHAPE=tc: 'tc qdisc replace dev psbed-nosuch0 .*expected NET_ADMIN" "$WORK/tc.err" ||
  fail "tc on a missing device: expected one line naming NET_ADMIN, got status $rc: $(cat "$WORK/tc.err")"
echo "refused (status $rc): $(cat "$WORK/tc.err")"
if [ "$(id -u)" -eq 0 ] && timeout 10 unshare -n true 2>/dev/null; then
  timeout 30 unshare -n bash -c '
    ip link set lo up && ip link add eth0 type veth peer name peer0 && ip link set eth0 up && ip link set peer0 up || exit 3
    env -i PATH="$PATH" PSBED_BIN="$1" PSBED_ROLE=worker PSBED_COORDINATOR=tcp://127.0.0.1:9 PSBED_CONNECT_TIMEOUT=1 \
      PSBED_SHAPE=tc PSBED_BANDWIDTH=100mbit PSBED_TRACE=0 PSBED_DATA=synthetic bash "$2" >/dev/null 2>&1
    tc qdisc show dev eth0' _ "$PSBED" "$ENTRY" >"$WORK/tc.out" 2>&1 || true
  grep -q 'qdisc tbf .* rate 100Mbit' "$WORK/tc.out" || fail "PSBED_SHAPE=tc in a network namespace: no tbf at 100Mbit on eth0: $(cat "$WORK/tc.out")"
  echo "tc in a network namespace: $(head -1 "$WORK/tc.out")"
else
  echo "tc in a network namespace: skipped (needs root and unshare -n)"
fi
# Every policy the binary names is one the entrypoint accepts.
binary_policies=$("$PSBED" coordinator --help | sed -n 's/.*transmission policy: \([a-z0-9, -]*\).*/\1/p' | head -1 | tr -d ' ' | tr ',' ' ')
[ -n "$binary_policies" ] || fail "cannot read the policies from 'psbed coordinator --help'"
for p in $binary_policies; do
  bash "$ENTRY" --list-policies | grep -qx "$p" || fail "psbed knows policy $p but the entrypoint does not (POLICIES in cluster/entrypoint.sh)"
done
echo "policies of the binary all accepted: $binary_policies"

# --- health: the coordinator listens, a worker reaches it, nothing there reads unhealthy ---
CPORT=$(free_port)
if health worker; then fail "worker health passed with no coordinator on port $CPORT"; fi
grep -q "worker unhealthy: nothing accepts connections at 127.0.0.1:$CPORT" "$WORK/health.err" ||
  fail "unhealthy worker: no one-line reason: $(cat "$WORK/health.err")"

# --- the dashboard for real: the coordinator serves 0.0.0.0:PORT with the token it read from
# PSBED_HTTP_TOKEN (401 without it, 200 with it); its log never shows the token ---
http_code() {  # URL [TOKEN]: the HTTP status, 0 if nothing answers
  $PY - "$@" <<'EOF'
import sys, urllib.error, urllib.request
req = urllib.request.Request(sys.argv[1])
if len(sys.argv) > 2:
    req.add_header("Authorization", "Bearer " + sys.argv[2])
try:
    print(urllib.request.urlopen(req, timeout=5).status)
except urllib.error.HTTPError as e:
    print(e.code)
except Exception:
    print(0)
EOF
}
CPORT=$(free_port)
HPORT=$(free_port)
start http-coordinator coordinator PSBED_WORKERS=1 PSBED_SERVERS=1 PSBED_RUN=http-check \
  PSBED_HTTP="0.0.0.0:$HPORT" PSBED_HTTP_TOKEN="$TOKEN"
http_pid=${PIDS[${#PIDS[@]} - 1]}
code=0
for _ in $(seq 1 100); do
  code=$(http_code "http://127.0.0.1:$HPORT/api/status")
  [ "$code" = 0 ] || break
  sleep 0.2
done
[ "$code" = 401 ] || fail "dashboard on 0.0.0.0:$HPORT without the token: expected 401, got $code: $(tail -n 5 "$WORK/http-coordinator.log")"
code=$(http_code "http://127.0.0.1:$HPORT/api/status" "$TOKEN")
[ "$code" = 200 ] || fail "dashboard with PSBED_HTTP_TOKEN's token: expected 200, got $code"
kill -TERM "$http_pid" 2>/dev/null || true
wait "$http_pid" 2>/dev/null || true
grep -q -- "--http 0.0.0.0:$HPORT" "$WORK/http-coordinator.log" || fail "coordinator log lacks --http: $(head -3 "$WORK/http-coordinator.log")"
grep -q -- "$TOKEN" "$WORK/http-coordinator.log" && fail "the coordinator's log shows the token: $(grep -- "$TOKEN" "$WORK/http-coordinator.log")"
echo "dashboard: --http 0.0.0.0:$HPORT, 401 without the token, 200 with PSBED_HTTP_TOKEN's, token not in the log"

# --- run 1: the compose defaults, PSBED_WORKERS=auto and PSBED_SERVERS=auto counted through
# DNS (localhost stands in for the service names: one address, so one of each) ---
CPORT=$(free_port)
SPORT=$(free_port)
start coordinator coordinator PSBED_WORKER_SERVICE=localhost PSBED_SERVER_SERVICE=localhost PSBED_DISCOVER_SETTLE=1
start server server PSBED_SERVER_PORT="$SPORT"
start worker worker
finish coordinator
finish server
finish worker
grep -q "PSBED_WORKERS=auto: starting with 1 worker(s)" "$WORK/coordinator.log" || fail "coordinator log lacks the auto count: $(head -5 "$WORK/coordinator.log")"
check_run "$WORK/runs/latest" 1 1 async wfbp
host=$(cat /proc/sys/kernel/hostname)
[ -f "$WORK/runs/latest/traces/worker-$host.trace.json" ] || fail "worker not named after the hostname (worker-$host)"

# --- run 2: 2 servers x 2 workers, bsp, p3, into the same run folder: the finished run 1 is
# moved aside, not mixed in. Health is checked while the coordinator waits for its nodes. ---
CPORT=$(free_port)
S0=$(free_port)
S1=$(free_port)
set2=(PSBED_WORKERS=2 PSBED_SERVERS=2 PSBED_MODE=bsp PSBED_POLICY=p3)
start coordinator coordinator "${set2[@]}"
wait_healthy coordinator "${set2[@]}"
health worker || fail "worker health failed with the coordinator listening: $(tail -n1 "$WORK/health.err")"
start server-a server "${set2[@]}" PSBED_NAME=server-0 PSBED_SERVER_PORT="$S0"
start server-b server "${set2[@]}" PSBED_NAME=server-1 PSBED_SERVER_PORT="$S1"
wait_healthy server "${set2[@]}" PSBED_SERVER_PORT="$S0"
start worker-a worker "${set2[@]}" PSBED_NAME=worker-0
start worker-b worker "${set2[@]}" PSBED_NAME=worker-1
for n in coordinator server-a server-b worker-a worker-b; do finish "$n"; done
echo "health: coordinator, server and worker healthy while running; worker unhealthy with no coordinator"
check_run "$WORK/runs/latest" 2 2 bsp p3
moved=$(ls -d "$WORK"/runs/latest-* 2>/dev/null | head -1)
[ -n "$moved" ] || fail "the finished run 1 was not moved aside: $(ls "$WORK/runs")"
check_run "$moved" 1 1 async wfbp
grep -q "moved the finished run" "$WORK/coordinator.log" || fail "coordinator log does not say it moved run 1 aside"
# PSBED_AFTER_RUN=hold (Kubernetes' default) holds after a run ends by itself, but a stop
# (docker stop, kubectl delete: SIGTERM) goes to psbed and the entrypoint ends with it, rather
# than hold until the grace period's SIGKILL.
# (It says when its own handler is in place: a stop sent before that, on a loaded host, would end
# it by the signal's default, 143, and say nothing of the entrypoint.)
printf '#!/bin/bash\ntrap "exit 130" TERM\ntouch "%s"\nsleep 60 & wait\n' "$WORK/slow.ready" >"$WORK/slow-psbed"
chmod +x "$WORK/slow-psbed"
env -i PATH="$PATH" HOME="$WORK" PSBED_BIN="$WORK/slow-psbed" PSBED_ROLE=coordinator PSBED_AFTER_RUN=hold \
  PSBED_RUNS="$WORK/hold-runs" bash "$ENTRY" >"$WORK/hold.out" 2>&1 &
hold=$!
for _ in $(seq 1 100); do [ -e "$WORK/slow.ready" ] && break; sleep 0.1; done
[ -e "$WORK/slow.ready" ] || { cat "$WORK/hold.out"; fail "the entrypoint did not start psbed within 10 s"; }
kill -TERM "$hold"
for _ in $(seq 50); do kill -0 "$hold" 2>/dev/null || break; sleep 0.1; done
if kill -0 "$hold" 2>/dev/null; then kill -9 "$hold"; pkill -f "$WORK/slow-psbed" || true; fail "PSBED_AFTER_RUN=hold held on after SIGTERM"; fi
rc=0; wait "$hold" || rc=$?
[ "$rc" = 130 ] || { cat "$WORK/hold.out"; fail "the entrypoint stopped by SIGTERM exited $rc, expected psbed's 130"; }
grep -q "psbed coordinator stopped with status 130" "$WORK/hold.out" || { cat "$WORK/hold.out"; fail "no line on the stop"; }
echo "hold: a SIGTERM stops the entrypoint with psbed, status 130"
echo "PASS"
