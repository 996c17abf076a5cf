#!/usr/bin/env bash
# Container entrypoint: maps PSBED_* environment variables to one role's flags and runs it.
# cluster/Dockerfile installs it as psbed-entrypoint; docker-compose.yml and cluster/k8s/ set the
# variables. Outside a container it runs the same (the integration tests start it as processes).
#
#   PSBED_ROLE=coordinator|server|worker|predict psbed-entrypoint
#   psbed-entrypoint health          exit 0 when this node's role is serving (healthchecks)
#   psbed-entrypoint --help          the variables, their defaults and meaning
#   psbed-entrypoint --list-vars     the variable names, one a line (cluster/check-manifests.py)
#   psbed-entrypoint --list-policies the transmission policies accepted in PSBED_POLICY
#   psbed-entrypoint SUBCOMMAND ...  runs `psbed SUBCOMMAND ...` (e.g. train, launch, profile)
#
# A bad setting stops it before anything starts: one line naming the variable and what was
# expected, exit status 2.
set -euo pipefail
prog=psbed-entrypoint
# As PID 1 without an init (Kubernetes, plain docker run) bash ignores SIGTERM unless it traps it:
# while it waits for the coordinator's name, `docker stop` would wait out its grace period. The
# hand-over to psbed (exec) leaves psbed's own handling.
trap 'exit 143' TERM
trap 'exit 130' INT

# The variables: name|default|meaning. This table is the one list: defaults are applied from it,
# --list-vars prints its names, and any other PSBED_* variable in the environment is refused (a
# misspelt PSBED_WOKERS would otherwise be ignored silently).
VARS='PSBED_ROLE||coordinator, server, worker or predict (required)
PSBED_BIN|psbed|the psbed binary (name on PATH or a path)
PSBED_COORDINATOR||server/worker: the coordinator, tcp://HOST:PORT or HOST[:PORT] (required)
PSBED_PORT|7000|coordinator: port it listens on
PSBED_BIND_HOST|0.0.0.0|address the coordinator and servers listen on
PSBED_SERVER_PORT|7100|server: port workers connect to (* = any free port; needs PSBED_BIND_HOST set to an address workers reach)
PSBED_ADVERTISE||server: host or IP given to workers (default: PSBED_BIND_HOST, or when that is 0.0.0.0 this host'"'"'s first non-loopback IPv4 address)
PSBED_NAME||server/worker: node name (default ROLE-INDEX under Kubernetes, else ROLE-HOSTNAME)
PSBED_MODEL|lenet5|model name (workloads/models) or path to a .toml spec
PSBED_DATA|mnist|data set: mnist or synthetic
PSBED_MODE|async|consistency: async, bsp or ssp:K
PSBED_POLICY|wfbp|transmission policy (psbed-entrypoint --list-policies)
PSBED_WORKERS|1|coordinator: workers to wait for, or auto (count the PSBED_WORKER_SERVICE containers); predict: workers to predict for
PSBED_SERVERS|1|coordinator: server shards to wait for, or auto (count the PSBED_SERVER_SERVICE containers); predict: shards to predict for
PSBED_WORKER_SERVICE|worker|auto: DNS names of the worker services, comma-separated (tasks.NAME is tried first, for swarm)
PSBED_SERVER_SERVICE|server|auto: DNS names of the server services, comma-separated
PSBED_DISCOVER_SETTLE|5|auto: seconds the count must stay unchanged before the run starts
PSBED_DISCOVER_TIMEOUT|120|auto: seconds to wait for at least one container of each service
PSBED_EPOCHS||passes over the training set, all workers together (coordinator default: 1)
PSBED_STEPS||steps per worker, instead of epochs
PSBED_BATCH||batch per worker (coordinator default: 64)
PSBED_LR||learning rate
PSBED_MOMENTUM||SGD momentum
PSBED_SEED||seed for initial parameters and data order
PSBED_PARTITION_BYTES||largest part a tensor is cut into, e.g. 4MiB
PSBED_SLICE_PARAMS||p3: parameters per slice
PSBED_PARTITION_PARAMS||bytescheduler: parameters per partition
PSBED_CREDIT||p3/bytescheduler: bytes in flight at most, e.g. 4MiB
PSBED_THREADS|1|worker: compute threads
PSBED_DEVICE|cpu|worker: cpu or gpu
PSBED_BANDWIDTH||server/worker: link rate per direction, e.g. 1gbit (empty: unshaped)
PSBED_LATENCY||server/worker: one-way latency added in the process, e.g. 200us
PSBED_SHAPE|emulate|emulate (token buckets inside psbed) or tc (tbf on PSBED_TC_DEV; needs NET_ADMIN)
PSBED_TC_DEV|eth0|PSBED_SHAPE=tc: the network device to shape
PSBED_RUNS|runs|folder holding run folders (the shared volume in containers)
PSBED_RUN|latest|run folder name under PSBED_RUNS: summary.json and traces/ go there
PSBED_PROFILE_RUN||predict: single-worker run folder under PSBED_RUNS to profile (default PSBED_RUN)
PSBED_TRACE|1|server/worker: 1 writes traces to the run folder, 0 does not
PSBED_CONNECT_TIMEOUT|300|server/worker: seconds to reach the coordinator
PSBED_REGISTER_TIMEOUT|300|coordinator: seconds for every node to register
PSBED_HTTP||coordinator: serve the dashboard and HTTP API on HOST:PORT, e.g. 0.0.0.0:8080 (:PORT = loopback only; any other host needs PSBED_HTTP_TOKEN)
PSBED_HTTP_TOKEN||token every dashboard/API request must carry (read by psbed from the environment; never logged)
PSBED_KEYS||CURVE key folder (docs/security.md): authorized_keys and coordinator.pub; every link authenticated and encrypted (empty: plain links)
PSBED_KEY||with PSBED_KEYS: the secret key file of this node (default PSBED_KEYS/ROLE.key)
PSBED_HEARTBEAT||seconds between heartbeats
PSBED_HEARTBEAT_TIMEOUT||coordinator: seconds of silence before a node is dead
PSBED_PUSH_PULL|0|coordinator, predict: 1 answers each push with the updated part, one round trip (async only; launch --push-pull)
PSBED_CONNECTIONS||coordinator, server: connections from each worker to each shard, 1 to 8, large parts striped over them (launch --connections; the servers get as many I/O threads)
PSBED_REPLICAS||coordinator: copies of every part, 1 or 2 (2: a dead shard'"'"'s parts are served by the next, and a shard container started again rejoins)
PSBED_LOG_LEVEL|info|trace, debug, info, warn or error
PSBED_AFTER_RUN|exit|exit, or hold: stay up after psbed ends (keeps a Kubernetes pod from restarting)
PSBED_EXTRA_ARGS||more flags for the role, split on spaces
PSBED_DRY_RUN|0|1: print the commands instead of running them
PSBED_DATA_DIR||IDX files of the mnist data (read by psbed; set in the image)
PSBED_MODELS_DIR||model specs (read by psbed; set in the image)'

# Kept in step with core/policy.cpp (the integration test checks that every policy the binary
# names is here).
POLICIES="bulk wfbp tf-random p3 bytescheduler prophet"
ROLES="coordinator server worker predict"

die() {
  echo "$prog: $*" >&2
  exit 2
}
log() { echo "$prog: $*" >&2; }

var_names() { while IFS='|' read -r name _; do echo "$name"; done <<<"$VARS"; }

usage() {
  sed -n '2,14s/^# \{0,1\}//p' "${BASH_SOURCE[0]}"
  echo
  echo "Variables (default in brackets):"
  while IFS='|' read -r name dflt meaning; do
    printf '  %-24s %s%s\n' "$name" "$meaning" "${dflt:+ [$dflt]}"
  done <<<"$VARS"
}

# Unknown PSBED_* variables are refused; unset ones get their defaults.
check_and_default_vars() {
  local known v
  known=" $(var_names | tr '\n' ' ')"
  for v in $(compgen -e | grep '^PSBED_' || true); do
    [[ $known == *" $v "* ]] || die "$v is not a variable psbed-entrypoint knows (psbed-entrypoint --help lists them; misspelt?)"
  done
  while IFS='|' read -r name dflt _; do
    if [[ -z ${!name:-} ]]; then
      printf -v "$name" '%s' "$dflt"
      [[ -z $dflt ]] || export "${name?}"
    fi
  done <<<"$VARS"
}

is_posint() { [[ $1 =~ ^[1-9][0-9]*$ ]]; }
is_uint() { [[ $1 =~ ^[0-9]+$ ]]; }
is_number() { [[ $1 =~ ^[0-9]*\.?[0-9]+([eE][-+]?[0-9]+)?$ ]]; }

need_posint() { [[ -z ${!1:-} ]] || is_posint "${!1}" || die "$1='${!1}' is not a whole number >= 1"; }
need_uint() { [[ -z ${!1:-} ]] || is_uint "${!1}" || die "$1='${!1}' is not a whole number >= 0"; }
need_number() { [[ -z ${!1:-} ]] || is_number "${!1}" || die "$1='${!1}' is not a non-negative number"; }
need_port() {
  if ! is_posint "${!1}" || ((${!1} > 65535)); then die "$1='${!1}' is not a port number (1-65535)"; fi
}
need_bytes() {
  [[ -z ${!1:-} ]] || [[ ${!1} =~ ^[0-9]*\.?[0-9]+\ *([kKmMgG]i?[bB]?|[bB])?$ ]] ||
    die "$1='${!1}' is not a size, expected a number with B, KiB, MiB, GiB, KB, MB or GB"
}
need_run_name() {
  [[ ${!1} =~ ^[A-Za-z0-9._-]+$ && ${!1} != . && ${!1} != .. ]] ||
    die "$1='${!1}' is not a folder name, expected letters, digits, '.', '_' or '-'"
}

# The link rate in bits/s, with psbed's units (bit, kbit, mbit, gbit; kbps/mbps/gbps are bits
# too, as in psbed; not tc's bytes).
bandwidth_bits() {
  local text=${1,,} num unit scale
  [[ $text =~ ^([0-9]*\.?[0-9]+)\ *([a-z]*)$ ]] ||
    die "PSBED_BANDWIDTH='$1' is not a rate, expected a number with bit, kbit, mbit or gbit (e.g. 1gbit)"
  num=${BASH_REMATCH[1]} unit=${BASH_REMATCH[2]}
  # A bare number would be bits/s (PSBED_BANDWIDTH=100 meant as Mbit/s would stall the run).
  if [[ -z $unit ]] && awk -v n="$num" 'BEGIN { exit !(n != 0) }'; then
    die "PSBED_BANDWIDTH='$1' has no unit: give bit, kbit, mbit or gbit (e.g. ${1}mbit)"
  fi
  case $unit in
    '' | bit | bps) scale=1 ;;
    kbit | kbps) scale=1000 ;;
    mbit | mbps) scale=1000000 ;;
    gbit | gbps) scale=1000000000 ;;
    *) die "PSBED_BANDWIDTH='$1' has an unknown unit '$unit', expected bit, kbit, mbit or gbit" ;;
  esac
  awk -v n="$num" -v s="$scale" 'BEGIN { printf "%.0f\n", n * s }'
}

check_common() {
  [[ -n ${PSBED_ROLE:-} ]] || die "PSBED_ROLE is not set, expected one of: ${ROLES// /, }"
  [[ " $ROLES " == *" $PSBED_ROLE "* ]] || die "PSBED_ROLE='$PSBED_ROLE' is not a role, expected one of: ${ROLES// /, }"
  [[ $PSBED_MODE =~ ^(async|bsp|ssp:[0-9]+)$ ]] ||
    die "PSBED_MODE='$PSBED_MODE' is not a consistency mode, expected async, bsp or ssp:K (K a whole number)"
  [[ " $POLICIES " == *" $PSBED_POLICY "* ]] ||
    die "PSBED_POLICY='$PSBED_POLICY' is not a transmission policy, expected one of: ${POLICIES// /, }"
  [[ $PSBED_DATA == mnist || $PSBED_DATA == synthetic ]] ||
    die "PSBED_DATA='$PSBED_DATA' is not a data set, expected mnist or synthetic"
  [[ $PSBED_DEVICE == cpu || $PSBED_DEVICE == gpu ]] || die "PSBED_DEVICE='$PSBED_DEVICE' is not a device, expected cpu or gpu"
  [[ $PSBED_SHAPE == emulate || $PSBED_SHAPE == tc ]] ||
    die "PSBED_SHAPE='$PSBED_SHAPE' is not a shaping method, expected emulate or tc"
  [[ $PSBED_TRACE == 0 || $PSBED_TRACE == 1 ]] || die "PSBED_TRACE='$PSBED_TRACE' is not 0 or 1"
  [[ $PSBED_DRY_RUN == 0 || $PSBED_DRY_RUN == 1 ]] || die "PSBED_DRY_RUN='$PSBED_DRY_RUN' is not 0 or 1"
  [[ $PSBED_AFTER_RUN == exit || $PSBED_AFTER_RUN == hold ]] ||
    die "PSBED_AFTER_RUN='$PSBED_AFTER_RUN' is not exit or hold"
  [[ $PSBED_LOG_LEVEL =~ ^(trace|debug|info|warn|error)$ ]] ||
    die "PSBED_LOG_LEVEL='$PSBED_LOG_LEVEL' is not a level, expected trace, debug, info, warn or error"
  need_posint PSBED_EPOCHS
  need_uint PSBED_STEPS
  need_posint PSBED_BATCH
  need_posint PSBED_THREADS
  need_uint PSBED_SEED
  need_posint PSBED_SLICE_PARAMS
  need_posint PSBED_PARTITION_PARAMS
  need_number PSBED_LR
  need_number PSBED_MOMENTUM
  need_number PSBED_HEARTBEAT
  need_number PSBED_HEARTBEAT_TIMEOUT
  [[ -z $PSBED_REPLICAS || $PSBED_REPLICAS == 1 || $PSBED_REPLICAS == 2 ]] ||
    die "PSBED_REPLICAS='$PSBED_REPLICAS' is not 1 or 2"
  [[ $PSBED_PUSH_PULL == 0 || $PSBED_PUSH_PULL == 1 ]] ||
    die "PSBED_PUSH_PULL='$PSBED_PUSH_PULL' is not 0 or 1"
  [[ -z $PSBED_CONNECTIONS || $PSBED_CONNECTIONS =~ ^[1-8]$ ]] ||
    die "PSBED_CONNECTIONS='$PSBED_CONNECTIONS' is not a whole number from 1 to 8"
  need_number PSBED_CONNECT_TIMEOUT
  need_number PSBED_REGISTER_TIMEOUT
  need_uint PSBED_DISCOVER_SETTLE
  need_posint PSBED_DISCOVER_TIMEOUT
  need_bytes PSBED_PARTITION_BYTES
  need_bytes PSBED_CREDIT
  need_port PSBED_PORT
  [[ $PSBED_SERVER_PORT == '*' ]] || need_port PSBED_SERVER_PORT
  check_http
  if [[ -n $PSBED_BANDWIDTH ]]; then bandwidth_bits "$PSBED_BANDWIDTH" >/dev/null; fi
  # A bare number would be seconds (psbed refuses one): a unit, or 0.
  if [[ -n $PSBED_LATENCY && ! ${PSBED_LATENCY,,} =~ ^([0-9]*\.?[0-9]+\ *(ns|us|ms|s)|0*\.?0+)$ ]]; then
    die "PSBED_LATENCY='$PSBED_LATENCY' is not a duration, expected a number with ns, us, ms or s (e.g. 200us)"
  fi
  if [[ $PSBED_SHAPE == tc && -z $PSBED_BANDWIDTH && ($PSBED_ROLE == server || $PSBED_ROLE == worker) ]]; then
    die "PSBED_SHAPE=tc needs PSBED_BANDWIDTH, the rate to shape $PSBED_TC_DEV to (e.g. 1gbit)"
  fi
  need_run_name PSBED_RUN
  [[ -z $PSBED_PROFILE_RUN ]] || need_run_name PSBED_PROFILE_RUN
  if [[ $PSBED_DRY_RUN == 0 ]] && ! command -v "$PSBED_BIN" >/dev/null 2>&1; then
    die "PSBED_BIN='$PSBED_BIN' is not an executable, expected the psbed binary on PATH or its path"
  fi
}

# PSBED_HTTP: psbed's --http address (HOST:PORT, :PORT or PORT; :PORT binds loopback). psbed
# refuses an address beyond loopback without a token; so does this, before anything starts.
check_http() {
  [[ -n $PSBED_HTTP ]] || return 0
  [[ $PSBED_ROLE == coordinator ]] ||
    die "PSBED_HTTP is for the coordinator only (it serves the dashboard), not PSBED_ROLE=$PSBED_ROLE; set it on the coordinator's service alone"
  local host port
  if [[ $PSBED_HTTP =~ ^(\[([0-9A-Fa-f:.]+)\]|([A-Za-z0-9._-]*)):([0-9]{1,5})$ ]]; then
    host=${BASH_REMATCH[2]}${BASH_REMATCH[3]} port=${BASH_REMATCH[4]}
  elif [[ $PSBED_HTTP =~ ^[0-9]{1,5}$ ]]; then
    host='' port=$PSBED_HTTP
  else
    die "PSBED_HTTP='$PSBED_HTTP' is not an address, expected HOST:PORT, :PORT or PORT (e.g. 0.0.0.0:8080)"
  fi
  ((10#$port <= 65535)) || die "PSBED_HTTP='$PSBED_HTTP' has no valid port (0-65535)"
  # As psbed decides: no host, localhost, ::1 or 127.* is loopback.
  [[ -z $host || $host == localhost || $host == ::1 || $host == 127.* ]] && return 0
  [[ -n $PSBED_HTTP_TOKEN || " $PSBED_EXTRA_ARGS " =~ \ --http-token[=\ ] ]] ||
    die "PSBED_HTTP='$PSBED_HTTP' is reachable from other hosts and needs PSBED_HTTP_TOKEN (the token every request must carry), or :PORT for loopback only"
}

# Splits PSBED_COORDINATOR into COORD_HOST and COORD_PORT.
parse_coordinator() {
  [[ -n $PSBED_COORDINATOR ]] ||
    die "PSBED_COORDINATOR is not set, expected the coordinator's address for a $PSBED_ROLE, e.g. tcp://coordinator:7000"
  local rest=${PSBED_COORDINATOR#tcp://}
  if [[ $rest =~ ^([A-Za-z0-9._-]+)(:([0-9]+))?$ ]]; then
    COORD_HOST=${BASH_REMATCH[1]} COORD_PORT=${BASH_REMATCH[3]:-$PSBED_PORT}
  else
    die "PSBED_COORDINATOR='$PSBED_COORDINATOR' is not an address, expected tcp://HOST:PORT or HOST[:PORT]"
  fi
  ((COORD_PORT >= 1 && COORD_PORT <= 65535)) || die "PSBED_COORDINATOR='$PSBED_COORDINATOR' has no valid port (1-65535)"
}

my_hostname() { cat /proc/sys/kernel/hostname 2>/dev/null || echo "${HOSTNAME:-localhost}"; }

# Node names must differ per replica: traces are <name>.trace.json in one shared folder.
node_name() {
  local host
  if [[ -n $PSBED_NAME ]]; then echo "$PSBED_NAME"; return; fi
  if [[ $PSBED_ROLE == worker && -n ${JOB_COMPLETION_INDEX:-} ]]; then echo "worker-$JOB_COMPLETION_INDEX"; return; fi
  host=$(my_hostname)
  # A StatefulSet pod is already named server-0, server-1, ...
  if [[ $host == "$PSBED_ROLE"-* ]]; then echo "$host"; else echo "$PSBED_ROLE-$host"; fi
}

# Distinct IPv4 addresses a name resolves to now (0 if none).
address_count() {
  { timeout 3 getent ahostsv4 "$1" 2>/dev/null || true; } | awk '{print $1}' | sort -u | wc -l
}

# Containers of the services named in $1 (comma-separated): tasks.NAME lists a swarm service's
# tasks; on one host compose's DNS answers NAME with every replica's address.
# All names are looked up at once, each bounded: a name that does not resolve (worker-gpu
# without its profile, tasks.NAME outside a swarm) waits out the resolver's timeout, and in turn
# those waits made every count take tens of seconds.
service_count() {
  local total=0 n name dir pids=()
  dir=$(mktemp -d)
  for name in ${1//,/ }; do
    address_count "tasks.$name" >"$dir/tasks.$name" &
    pids+=($!)
    address_count "$name" >"$dir/$name" &
    pids+=($!)
  done
  wait "${pids[@]}" || true
  for name in ${1//,/ }; do
    n=$(cat "$dir/tasks.$name")
    ((n > 0)) || n=$(cat "$dir/$name")
    total=$((total + n))
  done
  rm -rf "$dir"
  echo "$total"
}

# PSBED_WORKERS=auto: how `docker compose up --scale worker=8` tells the coordinator its count.
# Waits until at least one container answers and the count has not changed for SETTLE seconds.
discover() {
  local var=$1 svc_var=$2 what=$3
  local svc=${!svc_var} n last=-1 since=$SECONDS deadline=$((SECONDS + PSBED_DISCOVER_TIMEOUT))
  while :; do
    n=$(service_count "$svc")
    if ((n != last)); then
      log "$var=auto: $n $what container(s) answer as '$svc' so far"
      last=$n since=$SECONDS
    fi
    if ((n > 0 && SECONDS - since >= PSBED_DISCOVER_SETTLE)); then break; fi
    if ((SECONDS >= deadline)); then
      if ((n == 0)); then
        die "$var=auto: no $what container answered as '$svc' ($svc_var) within $PSBED_DISCOVER_TIMEOUT s (PSBED_DISCOVER_TIMEOUT); expected the service to be up, or set $var to a number"
      fi
      break
    fi
    sleep 1
  done
  log "$var=auto: starting with $n $what(s)"
  printf -v "$var" '%s' "$n"
}

resolve_count() {  # VAR SERVICE_VAR WHAT
  if [[ ${!1} == auto ]]; then
    discover "$@"
  else
    is_posint "${!1}" || die "$1='${!1}' is not a whole number >= 1 or auto"
  fi
}

# Waits (bounded by PSBED_CONNECT_TIMEOUT) until the coordinator's name resolves: in a swarm
# or a fresh compose project the coordinator's container may come up after this one.
wait_for_coordinator_name() {
  [[ $COORD_HOST =~ ^[0-9.]+$ ]] && return 0
  local whole=${PSBED_CONNECT_TIMEOUT%.*}
  local deadline=$((SECONDS + ${whole:-0} + 1))
  until getent hosts "$COORD_HOST" >/dev/null 2>&1; do
    ((SECONDS < deadline)) ||
      die "PSBED_COORDINATOR host '$COORD_HOST' did not resolve within $PSBED_CONNECT_TIMEOUT s (PSBED_CONNECT_TIMEOUT); expected the coordinator's service name"
    sleep 1
  done
}

# PSBED_SHAPE=tc: a token bucket on this container's device, in the kernel, instead of psbed's own.
shape_link() {
  local bits burst
  bits=$(bandwidth_bits "$PSBED_BANDWIDTH")
  # tbf needs a bucket of at least one timer tick of line rate (4 ms at HZ=250), and 32 KiB.
  burst=$(awk -v b="$bits" 'BEGIN { x = b / 8 * 0.004; if (x < 32768) x = 32768; printf "%.0f\n", x }')
  local cmd=(tc qdisc replace dev "$PSBED_TC_DEV" root tbf rate "${bits}bit" burst "$burst" latency 100ms)
  if [[ $PSBED_DRY_RUN == 1 ]]; then
    echo "${cmd[*]}"
    return
  fi
  command -v tc >/dev/null 2>&1 || die "PSBED_SHAPE=tc needs tc (Debian package iproute2) on PATH"
  local out
  if ! out=$("${cmd[@]}" 2>&1); then
    die "PSBED_SHAPE=tc: '${cmd[*]}' failed (${out%%$'\n'*}); expected NET_ADMIN (compose: -f docker-compose.tc.yml; Kubernetes: cluster/k8s/overlays/tc) and a device PSBED_TC_DEV"
  fi
  log "shaped $PSBED_TC_DEV to $PSBED_BANDWIDTH (tbf, burst $burst bytes)"
}

# A finished run already in the folder is moved aside, so its summary and traces are never mixed
# with this run's (nodes write their traces only at the end).
set_aside_finished_run() {
  local dir=$1 stamp dest
  [[ -f $dir/summary.json ]] || return 0
  stamp=$(date -u -r "$dir/summary.json" +%Y%m%d-%H%M%S)
  dest=$dir-$stamp
  local i=1
  while [[ -e $dest ]]; do dest=$dir-$stamp.$((i++)); done
  if [[ $PSBED_DRY_RUN == 1 ]]; then echo "mv $dir $dest"; return; fi
  mv "$dir" "$dest"
  log "moved the finished run in $dir to $dest"
}

add_opt() {  # FLAG VALUE: appends both when VALUE is not empty
  [[ -z $2 ]] || ARGS+=("$1" "$2")
}

# PSBED_KEYS: CURVE, with the role's secret key (compose and Kubernetes mount them as secrets).
key_opts() {
  [[ -n $PSBED_KEYS ]] || { [[ -z $PSBED_KEY ]] || die "PSBED_KEY is set but PSBED_KEYS is not: expected the key folder too"; return 0; }
  local key=${PSBED_KEY:-$PSBED_KEYS/$PSBED_ROLE.key}
  if [[ $PSBED_DRY_RUN != 1 ]]; then
    [[ -r $key ]] || die "PSBED_KEYS: no readable secret key '$key' (PSBED_KEY), expected the key of this role from psbed keys"
  fi
  ARGS+=(--keys "$PSBED_KEYS" --key "$key")
}

link_opts() {
  [[ $PSBED_SHAPE == tc ]] || add_opt --bandwidth "$PSBED_BANDWIDTH"
  add_opt --latency "$PSBED_LATENCY"
}

coordinator_args() {
  resolve_count PSBED_SERVERS PSBED_SERVER_SERVICE server
  resolve_count PSBED_WORKERS PSBED_WORKER_SERVICE worker
  set_aside_finished_run "$RUN_DIR"
  ARGS=(coordinator --bind "tcp://$PSBED_BIND_HOST:$PSBED_PORT" --servers "$PSBED_SERVERS" --workers "$PSBED_WORKERS"
    --model "$PSBED_MODEL" --mode "$PSBED_MODE" --policy "$PSBED_POLICY" --summary "$RUN_DIR/summary.json"
    --register-timeout "$PSBED_REGISTER_TIMEOUT")
  add_opt --epochs "$PSBED_EPOCHS"
  add_opt --steps "$PSBED_STEPS"
  add_opt --batch "$PSBED_BATCH"
  add_opt --lr "$PSBED_LR"
  add_opt --momentum "$PSBED_MOMENTUM"
  add_opt --seed "$PSBED_SEED"
  add_opt --partition-bytes "$PSBED_PARTITION_BYTES"
  add_opt --slice-params "$PSBED_SLICE_PARAMS"
  add_opt --partition-params "$PSBED_PARTITION_PARAMS"
  add_opt --credit "$PSBED_CREDIT"
  add_opt --heartbeat "$PSBED_HEARTBEAT"
  add_opt --heartbeat-timeout "$PSBED_HEARTBEAT_TIMEOUT"
  add_opt --replicas "$PSBED_REPLICAS"
  add_opt --connections "$PSBED_CONNECTIONS"
  [[ $PSBED_PUSH_PULL == 0 ]] || ARGS+=(--push-pull)
  # The token stays in the environment (psbed reads PSBED_HTTP_TOKEN): not in the argument list,
  # where the log line and every process listing would show it.
  add_opt --http "$PSBED_HTTP"
  key_opts
}

node_args() {  # server or worker
  parse_coordinator
  local name
  name=$(node_name)
  [[ $name =~ ^[A-Za-z0-9._-]+$ ]] || die "node name '$name' (PSBED_NAME or the hostname) has characters other than letters, digits, '.', '_' or '-'"
  ARGS=("$PSBED_ROLE" --coordinator "tcp://$COORD_HOST:$COORD_PORT" --name "$name"
    --connect-timeout "$PSBED_CONNECT_TIMEOUT")
  add_opt --heartbeat "$PSBED_HEARTBEAT"
  link_opts
  [[ $PSBED_TRACE == 0 ]] || ARGS+=(--trace-dir "$RUN_DIR/traces")
  key_opts
}

is_wildcard_host() { [[ $1 == 0.0.0.0 || $1 == '*' || $1 == :: || $1 == '[::]' ]]; }

# The address workers are given must reach this server from their host: tcp://0.0.0.0:PORT
# (what psbed would give for a wildcard bind) does not.
server_args() {
  node_args
  local advertise=$PSBED_ADVERTISE
  if [[ -n $advertise ]]; then
    [[ $advertise =~ ^[A-Za-z0-9._-]+$ ]] ||
      die "PSBED_ADVERTISE='$advertise' is not a host name or IPv4 address (give no tcp:// and no port; the port is PSBED_SERVER_PORT)"
    ! is_wildcard_host "$advertise" ||
      die "PSBED_ADVERTISE='$advertise' is no address workers can reach, expected this server's host name or IP"
    [[ $PSBED_SERVER_PORT != '*' ]] || die "PSBED_ADVERTISE needs a fixed PSBED_SERVER_PORT, not *"
  elif [[ $PSBED_SERVER_PORT == '*' ]]; then
    # psbed gives workers the endpoint it bound: usable only when bound to one address.
    ! is_wildcard_host "$PSBED_BIND_HOST" ||
      die "PSBED_SERVER_PORT=* with PSBED_BIND_HOST=$PSBED_BIND_HOST would give workers tcp://$PSBED_BIND_HOST:PORT, which other hosts cannot reach; expected a fixed port (e.g. 7100) or PSBED_BIND_HOST set to this server's address"
  elif ! is_wildcard_host "$PSBED_BIND_HOST"; then
    # Bound to one address: that is where it is reached.
    advertise=$PSBED_BIND_HOST
  else
    # Workers on other hosts need an address that reaches this one: this host's first IPv4.
    advertise=$( { getent ahostsv4 "$(my_hostname)" 2>/dev/null || true; } | awk '$1 !~ /^127\./ {print $1; exit}')
    [[ -n $advertise ]] || die "PSBED_ADVERTISE is not set and this host's name '$(my_hostname)' has no IPv4 address other than loopback; expected the host or IP workers reach this server at"
  fi
  ARGS+=(--bind "tcp://$PSBED_BIND_HOST:$PSBED_SERVER_PORT")
  add_opt --io-threads "$PSBED_CONNECTIONS"
  [[ -z $advertise ]] || ARGS+=(--advertise "tcp://$advertise:$PSBED_SERVER_PORT")
}

worker_args() {
  node_args
  ARGS+=(--model "$PSBED_MODEL" --data "$PSBED_DATA" --threads "$PSBED_THREADS" --device "$PSBED_DEVICE")
  # Several OpenMP runtimes spinning on shared cores measure contention, not the system.
  export OMP_WAIT_POLICY=${OMP_WAIT_POLICY:-passive}
}

# predict: profile a finished single-worker run, then predict PSBED_WORKERS x PSBED_SERVERS.
run_predict() {
  is_posint "$PSBED_WORKERS" || die "PSBED_WORKERS='$PSBED_WORKERS' is not a whole number >= 1 (predict needs the count to predict for)"
  is_posint "$PSBED_SERVERS" || die "PSBED_SERVERS='$PSBED_SERVERS' is not a whole number >= 1 (predict needs the count to predict for)"
  local run=$PSBED_RUNS/${PSBED_PROFILE_RUN:-$PSBED_RUN}
  [[ $PSBED_DRY_RUN == 1 || -f $run/summary.json ]] ||
    die "PSBED_PROFILE_RUN: $run has no summary.json, expected a finished single-worker run folder"
  local profile=$run/profile.json
  # The measured run's settings, each also in the file name (two predictions of different
  # settings never share a file).
  local name=predict-${PSBED_WORKERS}w${PSBED_SERVERS}s-$PSBED_POLICY-${PSBED_MODE/:/}
  ARGS=()
  add_opt --bandwidth "$PSBED_BANDWIDTH"
  add_opt --latency "$PSBED_LATENCY"
  add_opt --partition-bytes "$PSBED_PARTITION_BYTES"
  add_opt --slice-params "$PSBED_SLICE_PARAMS"
  add_opt --partition-params "$PSBED_PARTITION_PARAMS"
  add_opt --credit "$PSBED_CREDIT"
  local i
  for ((i = 0; i < ${#ARGS[@]}; i += 2)); do name+="-${ARGS[i]#--}${ARGS[i + 1]// /}"; done
  [[ $PSBED_PUSH_PULL == 0 ]] || { ARGS+=(--push-pull) && name+=-push-pull; }
  local out=$run/$name.json
  local prof=("$PSBED_BIN" profile "$run" -o "$profile")
  local pred=("$PSBED_BIN" predict --profile "$profile" --workers "$PSBED_WORKERS" --servers "$PSBED_SERVERS"
    --policy "$PSBED_POLICY" --mode "$PSBED_MODE" --json "$out" "${ARGS[@]}")
  if [[ $PSBED_DRY_RUN == 1 ]]; then
    printf '%q ' "${prof[@]}"; echo
    printf '%q ' "${pred[@]}"; echo
    return
  fi
  [[ -f $profile ]] || "${prof[@]}"
  "${pred[@]}"
  log "prediction written to $out"
}

# The arguments as shown in the log and by PSBED_DRY_RUN: a token given in PSBED_EXTRA_ARGS
# (--http-token T or --http-token=T), or PSBED_HTTP_TOKEN's value anywhere, reads ***.
shown_args() {
  SHOWN=()
  local a hide=0
  for a in "$@"; do
    if ((hide)); then a='***' hide=0
    elif [[ $a == --http-token ]]; then hide=1
    elif [[ $a == --http-token=* ]]; then a='--http-token=***'
    fi
    [[ -z $PSBED_HTTP_TOKEN ]] || a=${a//"$PSBED_HTTP_TOKEN"/***}
    SHOWN+=("$a")
  done
}

# Runs psbed; PSBED_AFTER_RUN=hold keeps this process up afterwards (a Deployment or StatefulSet
# pod would otherwise restart into a second run).
run_psbed() {
  if [[ $PSBED_DRY_RUN == 1 ]]; then
    shown_args "$@"
    printf '%q ' "$PSBED_BIN" "${SHOWN[@]}"
    echo
    exit 0
  fi
  if [[ $PSBED_AFTER_RUN == exit ]]; then exec "$PSBED_BIN" "$@"; fi
  local child rc stopping=0
  "$PSBED_BIN" "$@" &
  child=$!
  # A stop (docker stop, kubectl delete) goes to psbed, and this ends with it rather than hold
  # until the grace period's SIGKILL.
  trap 'stopping=1; kill -TERM "$child" 2>/dev/null || true' TERM INT
  set +e
  wait "$child"
  rc=$?
  while ((rc > 128)) && kill -0 "$child" 2>/dev/null; do
    wait "$child"
    rc=$?
  done
  set -e
  if ((stopping)); then
    log "psbed $PSBED_ROLE stopped with status $rc"
    exit "$rc"
  fi
  log "psbed $PSBED_ROLE ended with status $rc; holding (PSBED_AFTER_RUN=hold) until stopped"
  trap 'exit $rc' TERM INT
  sleep infinity &
  wait $! || true
  exit "$rc"
}

# Healthchecks: the coordinator and servers listen; a worker reaches its coordinator.
health() {
  local host port
  case ${PSBED_ROLE:-} in
    coordinator) host=127.0.0.1 port=$PSBED_PORT ;;
    server)
      if [[ $PSBED_SERVER_PORT == '*' ]]; then parse_coordinator; host=$COORD_HOST port=$COORD_PORT; else host=127.0.0.1 port=$PSBED_SERVER_PORT; fi ;;
    worker) parse_coordinator; host=$COORD_HOST port=$COORD_PORT ;;
    predict) exit 0 ;;
    *) check_common ;;
  esac
  [[ $PSBED_BIND_HOST == 0.0.0.0 || $PSBED_ROLE == worker ]] || host=$PSBED_BIND_HOST
  if timeout 3 bash -c 'exec 3<>"/dev/tcp/$0/$1"' "$host" "$port" 2>/dev/null; then exit 0; fi
  echo "$prog: $PSBED_ROLE unhealthy: nothing accepts connections at $host:$port" >&2
  exit 1
}

case ${1:-} in
  -h | --help) usage; exit 0 ;;
  --list-vars) var_names; exit 0 ;;
  --list-policies) tr ' ' '\n' <<<"$POLICIES"; exit 0 ;;
  health) check_and_default_vars; health ;;
  '') ;;
  -*) die "unknown option '$1', expected --help, --list-vars, --list-policies, health or a psbed subcommand" ;;
  *)
    check_and_default_vars
    exec "$PSBED_BIN" "$@"
    ;;
esac

# The image runs as psbed (10001), not root: a runs folder the host made for root (a bind mount
# of a missing folder) is the usual stop, and psbed would name only a file it cannot create.
check_runs_writable() {
  [[ $PSBED_DRY_RUN == 0 ]] || return 0
  local dir=$PSBED_RUNS
  [[ ! -d $RUN_DIR ]] || dir=$RUN_DIR
  mkdir -p "$dir" 2>/dev/null || true
  [[ -d $dir && -w $dir ]] ||
    die "PSBED_RUNS: $dir is not writable by uid $(id -u) (gid $(id -g)); expected a folder this user may write: on the host, mkdir -p runs && sudo chown $(id -u) runs, or run as its owner (compose: PSBED_USER=\$(id -u):\$(id -g); Kubernetes: fsGroup)"
}

check_and_default_vars
check_common
RUN_DIR=$PSBED_RUNS/$PSBED_RUN
check_runs_writable
# Only the coordinator serves HTTP: the token goes to no other process.
[[ $PSBED_ROLE == coordinator ]] || export -n PSBED_HTTP_TOKEN
case $PSBED_ROLE in
  coordinator) coordinator_args ;;
  server) server_args ;;
  worker) worker_args ;;
  predict) run_predict; exit 0 ;;
esac
ARGS+=(--log-level "$PSBED_LOG_LEVEL")
# shellcheck disable=SC2206  # split on spaces, as documented
# Split on spaces, not expanded as file names (a* stays a*).
if [[ -n $PSBED_EXTRA_ARGS ]]; then
  read -r -d '' -a extra <<<"$PSBED_EXTRA_ARGS" || true  # every line (a YAML | block), not the first
  ARGS+=("${extra[@]}")
fi
if [[ $PSBED_ROLE == server || $PSBED_ROLE == worker ]]; then
  [[ $PSBED_DRY_RUN == 1 ]] || wait_for_coordinator_name
  [[ $PSBED_SHAPE != tc ]] || shape_link
fi
[[ $PSBED_DRY_RUN == 1 ]] || mkdir -p "$RUN_DIR"
shown_args "${ARGS[@]}"
note=''
[[ $PSBED_ROLE != coordinator || -z $PSBED_HTTP_TOKEN ]] || note=' (HTTP token: PSBED_HTTP_TOKEN, not shown)'
log "$PSBED_ROLE: $PSBED_BIN ${SHOWN[*]}$note"
run_psbed "${ARGS[@]}"
