#!/usr/bin/env bash
# Writes the command-line reference (docs/cli-reference.md) from the binary's own --help, so the
# page cannot drift from the flags. After adding or changing a flag, run from the checkout:
#
#   docs/gen-cli-reference.sh build/release/cluster/psbed > docs/cli-reference.md
#
# It walks `psbed --help`'s subcommands and, for each, its own subcommands (bench ps, ctl policy).
# The docs test (tests/integration/docs.sh) regenerates the page and fails on any difference.
set -euo pipefail
if [ $# -ne 1 ] || [ ! -x "$1" ]; then
  echo "usage: $0 PSBED_BINARY > docs/cli-reference.md" >&2
  exit 2
fi
PSBED="$1"

# help ARGS...: the --help text, with the binary's path written as `psbed`.
help() {
  "$PSBED" "$@" --help 2>&1 | sed -e "s#$PSBED#psbed#g" -e 's/[[:space:]]*$//'
}
# subcommands ARGS...: the names listed under "Subcommands:" in that command's --help.
subcommands() {
  help "$@" | awk '/^Subcommands:/ { on = 1; next }
                   on && /^[^ ]/ { on = 0 }
                   on && /^  [a-z]/ { print $1 }'
}
section() {  # section LEVEL ARGS...
  local level=$1
  shift
  printf '%s psbed %s\n\n```text\n' "$level" "$*"
  help "$@"
  printf '```\n\n'
}

cat <<'EOF'
# psbed command reference

Generated from `psbed --help` by `docs/gen-cli-reference.sh`; do not edit by hand.
After changing a flag, regenerate it from the checkout:

```sh
docs/gen-cli-reference.sh build/release/cluster/psbed > docs/cli-reference.md
```

Units, config files, exit codes and signals, common to every command, are in [cli.md](cli.md).

EOF
printf '## psbed\n\n```text\n'
help
printf '```\n\n'
for cmd in $(subcommands); do
  section '##' "$cmd"
  for sub in $(subcommands "$cmd"); do
    section '###' "$cmd" "$sub"
  done
done
