#!/usr/bin/env bash
# Every C++/CUDA source is clang-format clean (the root .clang-format): lists the files that are
# not and exits 1. Fix with: clang-format -i FILE...
#   tests/format_check.sh [REPO]      (default: the repository this script is in)
set -euo pipefail
repo=${1:-$(cd "$(dirname "$0")/.." && pwd)}
cd "$repo"
command -v clang-format >/dev/null || { echo "format_check: clang-format is needed" >&2; exit 2; }
mapfile -t sources < <(git ls-files '*.cpp' '*.hpp' '*.h' '*.cc' '*.cu' '*.cuh')
bad=()
for f in "${sources[@]}"; do
  clang-format --dry-run --Werror "$f" >/dev/null 2>&1 || bad+=("$f")
done
if [ "${#bad[@]}" -gt 0 ]; then
  echo "not clang-format clean (clang-format -i to fix):"
  printf '  %s\n' "${bad[@]}"
  exit 1
fi
echo "format_check: ${#sources[@]} files clang-format clean"
