#!/usr/bin/env bash
# Runs the decoders' fuzz harnesses built in BUILD_DIR (tests/fuzz/CMakeLists.txt), one after the
# other, each from its seed corpus here (tests/fuzz/corpus/<name>; what it finds goes to
# BUILD_DIR/corpus/<name>, the seeds stay as they are). A crash, a leak, a hang (an input over
# 10 s) or a failed check stops the run with the harness's status; the input that did it is kept
# as BUILD_DIR/findings/<name>-crash-... to add to the seed corpus once the decoder is fixed.
#   tests/fuzz/run.sh BUILD_DIR [NAME...]     all harnesses, or the ones named (peer_json, ...)
#   FUZZ_SECONDS=60  each harness's time (0: no limit)
#   FUZZ_RUNS=N      each harness's executions at most (unset: no limit)
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
build="${1:?usage: tests/fuzz/run.sh BUILD_DIR [NAME...]}"
shift
names=("$@")
[ ${#names[@]} -gt 0 ] || names=(wire_header peer_json http_request config_toml model_spec profile idx)
seconds="${FUZZ_SECONDS:-60}"
runs="${FUZZ_RUNS:-}"

# The longest input each takes: a header is 64 bytes; the seeds of the others stay well below.
# A --config file of 1 KiB holds every flag psbed has; past that, toml++ under ASan slows to
# under 1,000 inputs a second on repeats of what 1 KiB covers.
max_len() {
  case "$1" in
    wire_header) echo 256 ;;
    config_toml) echo 1024 ;;
    profile) echo 8192 ;;
    *) echo 4096 ;;
  esac
}

mkdir -p "$build/findings"
for name in "${names[@]}"; do
  bin="$build/fuzz_$name"
  [ -x "$bin" ] || { echo "fuzz: no harness $bin (build it: make fuzz)" >&2; exit 2; }
  [ -d "$here/corpus/$name" ] || { echo "fuzz: no seed corpus $here/corpus/$name" >&2; exit 2; }
  mkdir -p "$build/corpus/$name"
  args=(-max_len="$(max_len "$name")" -timeout=10 -rss_limit_mb=2048 -max_total_time="$seconds"
        -print_final_stats=1 -artifact_prefix="$build/findings/$name-")
  [ -z "$runs" ] || args+=(-runs="$runs")
  echo "fuzz: $name (${seconds}s${runs:+, $runs runs at most})"
  start=$(date +%s)
  status=0
  UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1 "$bin" "${args[@]}" \
    "$build/corpus/$name" "$here/corpus/$name" >"$build/$name.log" 2>&1 || status=$?
  if [ "$status" -ne 0 ]; then
    tail -40 "$build/$name.log" >&2
    echo "fuzz: $name FAILED (status $status); the input is in $build/findings/, the log $build/$name.log" >&2
    exit "$status"
  fi
  execs=$(sed -n 's/^stat::number_of_executed_units: *//p' "$build/$name.log")
  rate=$(sed -n 's/^stat::average_exec_per_sec: *//p' "$build/$name.log")
  echo "fuzz: $name ok: $execs executions in $(($(date +%s) - start)) s ($rate/s)"
done
