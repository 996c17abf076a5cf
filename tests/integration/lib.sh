# Shared by the integration tests: each test gets the psbed binary and the source dir, works in
# a temporary folder, and kills whatever it started on every exit path.
set -euo pipefail
PSBED="$1"
SRC="$2"
export PSBED_DATA_DIR="${PSBED_DATA_DIR:-$SRC/data/mnist}"
WORK="$(mktemp -d /tmp/psbed-it.XXXXXX)"
PIDS=()
cleanup() {
  for p in "${PIDS[@]:-}"; do [ -n "$p" ] && kill -TERM -- "$p" 2>/dev/null || true; done
  sleep 0.2
  for p in "${PIDS[@]:-}"; do [ -n "$p" ] && kill -KILL -- "$p" 2>/dev/null || true; done
  rm -rf "$WORK"
}
trap cleanup EXIT
need_data() {
  if [ ! -f "$PSBED_DATA_DIR/train-images-idx3-ubyte" ] && [ ! -f "$PSBED_DATA_DIR/train-images-idx3-ubyte.gz" ]; then
    echo "SKIP: no MNIST digits in $PSBED_DATA_DIR (run make data)"; exit 0
  fi
}
fail() { echo "FAIL: $*" >&2; exit 1; }
# json FILE EXPR: evaluates a Python expression with the parsed file as `s`.
json() { python3 -c "import json,sys; s=json.load(open(sys.argv[1])); print($2)" "$1"; }
# node_pid NAME: the pid of this test's node NAME once its log shows it training (empty if it
# never does within 10 s).
node_pid() {
  local pid=""
  for _ in $(seq 1 100); do
    pid=$(pgrep -f -- "--name $1 .*$WORK" | head -1 || true)
    [ -n "$pid" ] && grep -q "steps of batch" "$WORK/run/logs/$1.log" 2>/dev/null && break
    sleep 0.1
  done
  echo "$pid"
}
