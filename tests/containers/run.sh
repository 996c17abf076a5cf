#!/usr/bin/env bash
# The container path for real (`make test-containers`, run as root before a release; too slow
# for `make test`): a Docker engine (Debian's docker.io, installed and started when missing), a
# base image built locally with debootstrap when none is present (no registry is needed), the
# project's image from cluster/Dockerfile, then with docker-compose: 2 shards + 3 workers train
# lenet5 to >= 95% test accuracy; a worker container killed mid-run is named by the coordinator
# and the others finish; the docs' vgg-mini example (synthetic data) runs to its end; with
# --replicas 2 a shard container killed and started again rejoins and the run ends ok;
# `docker-compose down` leaves no container or network behind. Whatever
# it started (the engine included) is stopped by PID at the end.
#   tests/containers/run.sh            PSBED_CT_KEEP=1 keeps the work folder
set -euo pipefail
SRC=$(cd "$(dirname "$0")/../.." && pwd)
BASE=psbed-base:bookworm
IMAGE=psbed:containertest
PROJECT=psbedct
WORK=$(mktemp -d /tmp/psbed-containers.XXXXXX)
DOCKERD_PID=
t0=$(date +%s)
say() { echo "test-containers [$(($(date +%s) - t0))s]: $*" >&2; }
fail() { say "FAIL: $*"; exit 1; }

[ "$(id -u)" -eq 0 ] || fail "run as root (it installs and starts the Docker engine)"

# The engine's own client, not a newer one earlier on PATH that may want buildx for BuildKit.
DOCKER=docker
[ -x /usr/bin/docker ] && DOCKER=/usr/bin/docker
compose() { docker-compose -p "$PROJECT" -f "$SRC/docker-compose.yml" "$@"; }

cleanup() {
  set +e
  if [ -n "${DOCKER_UP:-}" ]; then
    compose down -v --remove-orphans >/dev/null 2>&1
  fi
  if [ -n "$DOCKERD_PID" ]; then
    kill -TERM "$DOCKERD_PID" 2>/dev/null
    for _ in $(seq 60); do kill -0 "$DOCKERD_PID" 2>/dev/null || break; sleep 0.5; done
    kill -KILL "$DOCKERD_PID" 2>/dev/null
  fi
  if [ -n "${PSBED_CT_KEEP:-}" ]; then say "work folder kept: $WORK"; else rm -rf "$WORK"; fi
}
trap cleanup EXIT

# --- the engine ---------------------------------------------------------------------------------
need_pkgs=()
command -v dockerd >/dev/null || need_pkgs+=(docker.io)
command -v docker-compose >/dev/null || need_pkgs+=(docker-compose)
command -v debootstrap >/dev/null || need_pkgs+=(debootstrap)
# compose's `init: true` needs an init for the containers; Debian ships it as tini.
[ -x /usr/bin/tini-static ] || [ -x /usr/sbin/docker-init ] || need_pkgs+=(tini)
if [ ${#need_pkgs[@]} -gt 0 ]; then
  say "installing ${need_pkgs[*]}"
  DEBIAN_FRONTEND=noninteractive apt-get install -y -q --no-install-recommends "${need_pkgs[@]}" \
    >"$WORK/apt.log" 2>&1 || { tail -5 "$WORK/apt.log" >&2; fail "apt-get install ${need_pkgs[*]} failed"; }
fi
[ -x /usr/bin/docker ] && DOCKER=/usr/bin/docker

if ! $DOCKER info >/dev/null 2>&1; then
  # No firewall rules of the engine's own on this host: containers reach each other on the
  # compose network's bridge; builds use the host's network (below) to reach the mirrors.
  init_opt=()
  [ -x /usr/sbin/docker-init ] || init_opt=(--init-path /usr/bin/tini-static)
  dockerd --iptables=false --ip6tables=false --ip-forward=false "${init_opt[@]}" \
    >"$WORK/dockerd.log" 2>&1 &
  DOCKERD_PID=$!
  for _ in $(seq 120); do $DOCKER info >/dev/null 2>&1 && break; sleep 0.5; done
  $DOCKER info >/dev/null 2>&1 || { tail -20 "$WORK/dockerd.log" >&2; fail "dockerd did not start"; }
  say "dockerd started (pid $DOCKERD_PID)"
fi

# --- the base image -----------------------------------------------------------------------------
mirror() {
  # The first Debian mirror apt uses (deb822 .sources or one-line .list).
  local m
  m=$(awk '/^URIs:/ {print $2; exit} /^deb / {for (i = 2; i <= NF; i++) if ($i ~ /^https?:/) {print $i; exit}}' \
    /etc/apt/sources.list /etc/apt/sources.list.d/*.list /etc/apt/sources.list.d/*.sources 2>/dev/null || true)
  echo "${m:-http://deb.debian.org/debian}"
}
if ! $DOCKER image inspect "$BASE" >/dev/null 2>&1; then
  m=$(mirror)
  say "building $BASE with debootstrap from $m"
  debootstrap --variant=minbase bookworm "$WORK/rootfs" "$m" >"$WORK/debootstrap.log" 2>&1 ||
    { tail -5 "$WORK/debootstrap.log" >&2; fail "debootstrap bookworm from $m failed"; }
  tar -C "$WORK/rootfs" -c . | $DOCKER import - "$BASE" >/dev/null
  rm -rf "$WORK/rootfs"
fi

# --- the project's image ------------------------------------------------------------------------
# The host's CA certificates (a network that intercepts TLS) as a build secret, and its proxy
# settings as build arguments (Docker keeps those out of the image's history).
build_args=(--build-arg "PSBED_BASE=$BASE" --build-arg "PSBED_RUNTIME_BASE=$BASE")
for v in http_proxy https_proxy no_proxy HTTP_PROXY HTTPS_PROXY NO_PROXY; do
  [ -n "${!v:-}" ] && build_args+=(--build-arg "$v=${!v}")
done
[ -s /etc/ssl/certs/ca-certificates.crt ] &&
  build_args+=(--secret id=cacerts,src=/etc/ssl/certs/ca-certificates.crt)
say "building $IMAGE from cluster/Dockerfile"
DOCKER_BUILDKIT=1 $DOCKER build --network host --progress plain -f "$SRC/cluster/Dockerfile" \
  "${build_args[@]}" -t "$IMAGE" "$SRC" >"$WORK/build.log" 2>&1 ||
  { tail -30 "$WORK/build.log" >&2; fail "docker build failed (log: $WORK/build.log)"; }
say "image built"

# --- the runs -----------------------------------------------------------------------------------
export PSBED_IMAGE=$IMAGE PSBED_RUNS_HOST=$WORK/runs
# The image runs as uid 10001 (cluster/Dockerfile): the bind-mounted run folder must be its, as
# docs/deploy-docker.md tells users.
mkdir -p "$WORK/runs" && chown 10001:10001 "$WORK/runs"
coordinator_wait() {  # $1: seconds; the coordinator's exit code
  local c
  c=$(compose ps -q coordinator)
  timeout "$1" $DOCKER wait "$c" || fail "the coordinator did not finish in $1 s"
}
summary() { python3 -c "import json, sys; s = json.load(open('$WORK/runs/$1/summary.json')); print($2)"; }

# 1. Training: the settings of tests/integration/cluster_accuracy.sh (async, lr 0.005, 5 epochs),
# the counts found by the coordinator as compose's defaults leave them (PSBED_WORKERS=auto).
say "run 1: 2 shards + 3 workers, lenet5, counted by the coordinator"
DOCKER_UP=1
PSBED_RUN=accuracy PSBED_EPOCHS=5 PSBED_BATCH=32 PSBED_LR=0.005 \
  compose up -d --no-build --scale server=2 --scale worker=3 >"$WORK/up1.log" 2>&1 ||
  { cat "$WORK/up1.log" >&2; fail "docker-compose up failed"; }
rc=$(coordinator_wait 900)
compose logs --no-color >"$WORK/run1.log" 2>&1
[ "$rc" -eq 0 ] || { tail -30 "$WORK/run1.log" >&2; fail "run 1: the coordinator exited $rc"; }
acc=$(summary accuracy 's["test_accuracy"]')
say "run 1: test accuracy $acc"
python3 -c "import sys; sys.exit(0 if float('$acc') >= 0.95 else 1)" || fail "run 1: test accuracy $acc < 0.95"
[ "$(summary accuracy 'len(s["per_worker"])')" -eq 3 ] || fail "run 1: expected 3 workers in the summary"
compose down -v --remove-orphans >/dev/null 2>&1

# 2. A worker container killed mid-run: the coordinator names it, the others finish.
say "run 2: a worker container killed mid-run"
PSBED_RUN=killed PSBED_WORKERS=3 PSBED_SERVERS=2 PSBED_STEPS=3000 PSBED_BATCH=32 PSBED_LR=0.005 \
  compose up -d --no-build --scale server=2 --scale worker=3 >"$WORK/up2.log" 2>&1 ||
  { cat "$WORK/up2.log" >&2; fail "docker-compose up failed"; }
victim=$(compose ps -q worker)
victim=${victim%%$'\n'*}
victim_host=$($DOCKER inspect -f '{{.Config.Hostname}}' "$victim")
# Kill it once it trains (it says how many steps of which batch it starts on).
for _ in $(seq 300); do
  [[ $($DOCKER logs "$victim" 2>&1) == *" steps of batch "* ]] && break
  sleep 1
done
sleep 2
$DOCKER kill "$victim" >/dev/null
say "run 2: killed worker container $victim_host"
rc=$(coordinator_wait 600)
compose logs --no-color coordinator >"$WORK/run2.log" 2>&1
grep -q "worker-$victim_host (worker .*) is dead" "$WORK/run2.log" ||
  { tail -30 "$WORK/run2.log" >&2; fail "run 2: the coordinator did not name worker-$victim_host"; }
[ "$(summary killed '",".join(f["name"] for f in s["failed_nodes"])')" = "worker-$victim_host" ] ||
  fail "run 2: the summary's failed nodes are not worker-$victim_host alone"
[ "$(summary killed 'sum(1 for w in s["per_worker"] if w["alive"] and w.get("steps") == 3000)')" -eq 2 ] ||
  fail "run 2: the 2 other workers did not finish their 3000 steps"
say "run 2: the coordinator named worker-$victim_host, the 2 others finished"

# 3. The docs' vgg-mini example (docs/deploy-docker.md), as written but for a few steps: it trains
# on synthetic data, so every worker starts and the run ends by itself.
compose down -v --remove-orphans >/dev/null 2>&1
say "run 3: the docs' vgg-mini example, 2 shards + 4 workers, bsp, p3, 5 steps"
PSBED_RUN=vgg-bsp PSBED_MODEL=vgg-mini PSBED_DATA=synthetic PSBED_MODE=bsp PSBED_POLICY=p3 PSBED_STEPS=5 \
  compose up -d --no-build --scale worker=4 --scale server=2 >"$WORK/up3.log" 2>&1 ||
  { cat "$WORK/up3.log" >&2; fail "docker-compose up failed"; }
rc=$(coordinator_wait 600)
compose logs --no-color >"$WORK/run3.log" 2>&1
[ "$rc" -eq 0 ] || { tail -30 "$WORK/run3.log" >&2; fail "run 3: the coordinator exited $rc"; }
[ "$(summary vgg-bsp 's["ok"] and "vgg-mini" in s["model"] and len(s["per_worker"]) == 4')" = True ] ||
  fail "run 3: the vgg-mini run's summary is not ok with 4 workers"
say "run 3: vgg-mini trained $(summary vgg-bsp 's["steps"]') steps at $(summary vgg-bsp 'round(s["images_per_sec"], 1)') images/s"

# 4. --replicas 2: a shard container killed (its successor serves its parts, found dead at the
# heartbeat timeout) and started again rejoins: it takes a copy of every part, and the run ends ok.
compose down -v --remove-orphans >/dev/null 2>&1
say "run 4: --replicas 2, a shard container killed and started again"
PSBED_RUN=rejoin PSBED_WORKERS=3 PSBED_SERVERS=2 PSBED_STEPS=3000 PSBED_BATCH=32 PSBED_LR=0.03 \
  PSBED_MODE=bsp PSBED_REPLICAS=2 PSBED_HEARTBEAT_TIMEOUT=3 \
  compose up -d --no-build --scale server=2 --scale worker=3 >"$WORK/up4.log" 2>&1 ||
  { cat "$WORK/up4.log" >&2; fail "docker-compose up failed"; }
coord=$(compose ps -q coordinator)
shard=$(compose ps -q server)
shard=${shard%%$'\n'*}
shard_name=server-$($DOCKER inspect -f '{{.Config.Hostname}}' "$shard")
wait_coordinator() {  # PATTERN SECONDS
  for _ in $(seq "$2"); do
    [[ $($DOCKER logs "$coord" 2>&1) == *"$1"* ]] && return 0
    sleep 1
  done
  $DOCKER logs "$coord" 2>&1 | tail -20 >&2
  fail "run 4: no '$1' in the coordinator's log within $2 s"
}
wait_coordinator "cluster complete" 300
sleep 3
$DOCKER kill "$shard" >/dev/null
say "run 4: killed shard container $shard_name"
wait_coordinator "serves the parts of $shard_name" 30
$DOCKER start "$shard" >/dev/null
say "run 4: started $shard_name again"
wait_coordinator "$shard_name holds a copy of every part again" 60
rc=$(coordinator_wait 600)
compose logs --no-color >"$WORK/run4.log" 2>&1
[ "$rc" -eq 0 ] || { tail -30 "$WORK/run4.log" >&2; fail "run 4: the coordinator exited $rc"; }
[ "$(summary rejoin 's["ok"] and s["rejoins"][0]["server"] == "'"$shard_name"'" and "copy_at_s" in s["rejoins"][0]')" = True ] ||
  fail "run 4: the summary is not ok with $shard_name rejoined"
say "run 4: $shard_name rejoined: $(summary rejoin 's["rejoins"][0]'); test accuracy $(summary rejoin 's["test_accuracy"]')"

# 5. down leaves nothing behind.
compose down -v --remove-orphans >/dev/null 2>&1
DOCKER_UP=
left=$($DOCKER ps -a -q --filter "label=com.docker.compose.project=$PROJECT")
[ -z "$left" ] || fail "containers left after down: $left"
nets=$($DOCKER network ls -q --filter "label=com.docker.compose.project=$PROJECT")
[ -z "$nets" ] || fail "networks left after down: $nets"
say "PASS ($(($(date +%s) - t0)) s)"
