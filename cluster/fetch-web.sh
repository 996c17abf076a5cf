#!/usr/bin/env bash
# Fetches what the coordinator's dashboard and its browser test use from the npm registry, into a
# git-ignored folder: the charting library uPlot (built into psbed, so the page works with no
# network access) and, with `test`, playwright-core (drives Debian's chromium in the browser test).
#
# usage: cluster/fetch-web.sh [test]      (into .cache/web under the source tree)
#
# Idempotent: what is already there is not fetched again, and nothing is printed then. Needs npm
# (only the npm registry is contacted).
set -euo pipefail

prog=fetch-web
UPLOT=1.6.32
PLAYWRIGHT=1.57.0
case "${1:-}" in
  -h | --help)
    sed -n '2,9s/^# \{0,1\}//p' "${BASH_SOURCE[0]}"
    exit 0
    ;;
  "" | test) ;;
  *)
    echo "usage: cluster/fetch-web.sh [test]" >&2
    exit 2
    ;;
esac
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
out=$root/.cache/web
vendor=$out/uplot-$UPLOT

need_npm() {
  command -v npm >/dev/null 2>&1 && return 0
  echo "$prog: npm not found, expected it on PATH to fetch $1 (apt-get install npm)" >&2
  exit 1
}
# The most telling line of npm's error report, without its "npm error" / "npm ERR!" prefix.
npm_reason() {
  { grep -m1 -E 'Error|E404|failed|not found|No matching' "$1" || tail -n1 "$1"; } |
    sed -E 's/^npm (error|ERR!) *//' || true
}

if [[ ! -f $vendor/uPlot.iife.min.js || ! -f $vendor/uPlot.min.css ]]; then
  need_npm "uplot@$UPLOT"
  tmp=$(mktemp -d "${TMPDIR:-/tmp}/psbed-fetch-web.XXXXXX")
  trap 'rm -rf "$tmp"' EXIT
  if ! (cd "$tmp" && npm pack "uplot@$UPLOT" --loglevel=error --no-update-notifier >pack.out 2>pack.err); then
    echo "$prog: 'npm pack uplot@$UPLOT' failed ($(npm_reason "$tmp/pack.err")); expected the npm registry to be reachable" >&2
    exit 1
  fi
  tar -xzf "$tmp"/uplot-*.tgz -C "$tmp" package/dist/uPlot.iife.min.js package/dist/uPlot.min.css package/LICENSE ||
    { echo "$prog: uplot-$UPLOT.tgz lacks dist/uPlot.iife.min.js or dist/uPlot.min.css" >&2; exit 1; }
  mkdir -p "$vendor.tmp"
  cp "$tmp"/package/dist/uPlot.iife.min.js "$tmp"/package/dist/uPlot.min.css "$tmp"/package/LICENSE "$vendor.tmp"/
  rm -rf "$vendor"
  mv "$vendor.tmp" "$vendor"  # whole or not at all: a half-fetched folder never looks complete
  echo "$prog: uPlot $UPLOT in $vendor" >&2
fi

if [[ ${1:-} == test && ! -f $out/node_modules/playwright-core/package.json ]]; then
  need_npm "playwright-core@$PLAYWRIGHT"
  mkdir -p "$out"
  [[ -f $out/package.json ]] || echo '{"private": true}' >"$out/package.json"
  if ! npm install --prefix "$out" --no-save --no-audit --no-fund --loglevel=error --no-update-notifier \
    "playwright-core@$PLAYWRIGHT" >"$out/npm.log" 2>&1; then
    echo "$prog: 'npm install playwright-core@$PLAYWRIGHT' failed ($(npm_reason "$out/npm.log"))" >&2
    exit 1
  fi
  echo "$prog: playwright-core $PLAYWRIGHT in $out/node_modules" >&2
fi
