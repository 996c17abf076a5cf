#!/usr/bin/env bash
# The house rules on size, rooms one can live in: no source file over 800 lines, no function
# over 150. Reports every file and function that breaks them and exits 1 if any outside tests/
# does; a test file over 800 lines is reported as a warning only, and test functions (Catch2
# cases are long lists of checks) are not measured.
#   tests/house_check.sh [REPO]      (default: the repository this script is in)
# Needs git and Universal Ctags (ctags --fields=+ne gives each function's end line).
set -euo pipefail
repo=${1:-$(cd "$(dirname "$0")/.." && pwd)}
cd "$repo"
max_file=800
max_function=150
command -v ctags >/dev/null || { echo "house_check: ctags (Universal Ctags) is needed" >&2; exit 2; }

broken=0
mapfile -t sources < <(git ls-files '*.cpp' '*.hpp' '*.h' '*.cc' '*.cu' '*.cuh' '*.py' '*.sh')

# Files: lines counted as wc does.
while read -r lines file; do
  [ "$file" = total ] && continue
  [ "$lines" -le "$max_file" ] && continue
  case "$file" in
    tests/*) echo "warning: $file: $lines lines (over $max_file; a test file)" ;;
    *) echo "$file: $lines lines (over $max_file)"; broken=1 ;;
  esac
done < <(printf '%s\0' "${sources[@]}" | xargs -0 wc -l | sort -k2)

# Functions (C++ and CUDA outside tests/): ctags' start and end lines.
mapfile -t code < <(printf '%s\n' "${sources[@]}" | grep -E '\.(cpp|hpp|h|cc|cu|cuh)$' | grep -v '^tests/' || true)
if [ "${#code[@]}" -gt 0 ]; then
  long=$(printf '%s\0' "${code[@]}" |
    xargs -0 ctags --fields=+ne --c++-kinds=f --language-force=C++ -o - |
    awk -F'\t' -v max="$max_function" '{
      l = e = 0
      for (i = 4; i <= NF; i++) { if ($i ~ /^line:/) l = substr($i, 6); if ($i ~ /^end:/) e = substr($i, 5) }
      if (e - l + 1 > max) printf "%s:%s %s (%d lines, over %d)\n", $2, l, $1, e - l + 1, max
    }' | sort -t: -k1,1 -k2,2n)
  if [ -n "$long" ]; then
    echo "$long"
    broken=1
  fi
fi

if [ "$broken" -eq 0 ]; then echo "house_check: every file within $max_file lines, every function within $max_function"; fi
exit "$broken"
