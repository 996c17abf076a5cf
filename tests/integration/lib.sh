# Shared by the integration tests: each test gets the psbed binary and the source dir, works in
# a temporary folder, and kills whatever it started on every exit path.
set -euo pipefail
PSBED="$1"
SRC="$2"
export PSBED_DATA_DIR="${PSBED_DATA_DIR:-$SRC/data/mnist}"
WORK="$(mktemp -d /tmp/psbed-it.XXXXXX)"
# PSBED_IT_KEEP=1: a failed test keeps its folder. Read here and taken out of the environment
# (the container entrypoint refuses PSBED_* variables it does not know).
KEEP_FAILED="${PSBED_IT_KEEP:-0}"
unset PSBED_IT_KEEP
PIDS=()
# signal_all SIG: each started process's group (`timeout` leads one of its own, holding the
# launcher), or the process alone where it leads none; and every process whose command line
# names this test's folder (the nodes a launcher started, each in a group of its own).
signal_all() {
  for p in "${PIDS[@]:-}"; do
    [ -n "$p" ] || continue
    kill "-$1" -- "-$p" 2>/dev/null || kill "-$1" -- "$p" 2>/dev/null || true
  done
  pkill "-$1" -f -- "$WORK" 2>/dev/null || true
}
alive() {
  for p in "${PIDS[@]:-}"; do
    [ -n "$p" ] || continue
    { kill -0 -- "-$p" || kill -0 -- "$p"; } 2>/dev/null && return 0
  done
  pgrep -f -- "$WORK" >/dev/null
}
# Every exit path: TERM, up to 5 s to stop (a launcher stops its nodes), then KILL; the work
# folder goes only when nothing writes to it any more (a failed test's stays with
# PSBED_IT_KEEP=1, for its logs and summaries).
cleanup() {
  local rc=$?
  signal_all TERM
  for _ in $(seq 1 50); do alive || break; sleep 0.1; done
  signal_all KILL
  for _ in $(seq 1 20); do alive || break; sleep 0.1; done
  if [ "$rc" != 0 ] && [ "$rc" != 77 ] && [ "$KEEP_FAILED" != 0 ] && [ -n "$KEEP_FAILED" ]; then
    echo "kept $WORK (PSBED_IT_KEEP)" >&2
  else
    rm -rf "$WORK"
  fi
}
trap cleanup EXIT
# skip REASON: ctest reports the test as skipped (SKIP_RETURN_CODE 77), not passed.
skip() { echo "SKIP: $*"; exit 77; }
need_data() {
  if [ ! -f "$PSBED_DATA_DIR/train-images-idx3-ubyte" ] && [ ! -f "$PSBED_DATA_DIR/train-images-idx3-ubyte.gz" ]; then
    skip "no MNIST digits in $PSBED_DATA_DIR (run make data)"
  fi
}
fail() { echo "FAIL: $*" >&2; exit 1; }
# Every HTTP request in a test is bounded: a server that stops answering fails the test. (Check
# for curl itself with `type -P curl`: this function makes `command -v curl` always succeed.)
curl() { command curl --max-time 30 "$@"; }
# json FILE EXPR: evaluates a Python expression with the parsed file as `s`.
json() { python3 -c "import json,sys; s=json.load(open(sys.argv[1])); print($2)" "$1"; }
# node_pid NAME: the pid of this test's node NAME once its log shows it training (empty if it
# never does within 10 s).
node_pid() {
  local pid=""
  for _ in $(seq 1 100); do
    pid=$(pgrep -f -- "--name $1 .*$WORK" | head -1 || true)
    if [ -n "$pid" ] && grep -q "steps of batch" "$WORK/run/logs/$1.log" 2>/dev/null; then
      echo "$pid"
      return
    fi
    sleep 0.1
  done
}
# endpoint_of FILE: the endpoint a coordinator started with --endpoint-file FILE wrote, waited for
# up to 5 s (use as: ep=$(endpoint_of "$WORK/ep") || exit 1).
endpoint_of() {
  for _ in $(seq 1 100); do [ -s "$1" ] && break; sleep 0.05; done
  cat "$1" 2>/dev/null || fail "the coordinator wrote no endpoint in $1"
}
