#!/usr/bin/env bash
# The "Measured again" accuracy table of docs/results/prediction-accuracy.md is what `psbed validate`
# gives on the measured grid
# kept in docs/grid/ (docs/grid/README.md's commands): a change to the simulator that moves a
# figure fails here until the table (and the text around it) is measured and written again.
source "$(dirname "$0")/lib.sh"
GRID="$SRC/docs/grid"
[ -d "$GRID/lenet5" ] || fail "no measured grid in $GRID"

validate() {  # validate NAME PROFILE RUN_DIR...
  local name=$1 profile=$2
  shift 2
  timeout 300 "$PSBED" validate --profile "$profile" "$@" --out "$WORK/$name" \
    >"$WORK/$name.log" 2>&1 || { cat "$WORK/$name.log" >&2; fail "validate $name"; }
  [ -s "$WORK/$name/validation.json" ] || fail "validate $name wrote no validation.json"
}
first_runs() {  # first_runs MODEL: each point's first run (its repeats are <point>-r2/, -r3/)
  local d
  for d in "$GRID/$1"/*/; do
    case "$d" in *-r[0-9]/) ;; *) echo "$d" ;; esac
  done
}
for m in lenet5 cnn-cifar vgg-mini; do
  validate "$m" "$GRID/$m/profile-host-$m.json" "$GRID/$m"/*/
  mapfile -t first < <(first_runs "$m")
  [ "${#first[@]}" -ge 48 ] || fail "expected 48 or more first runs of $m, found ${#first[@]}"
  validate "$m-first" "$GRID/$m/profile-host-$m.json" "${first[@]}"
done

# Each row of the table against the validations it summarizes, at the precision it prints:
# configurations, runs, mean |error|, max, median and configurations within 10%. The simulations
# are seeded, so the figures are the same on every run; another compiler could move one across a
# rounding boundary, and then the table is written again from its validation.
python3 - "$SRC/docs/results/prediction-accuracy.md" "$WORK" <<'PY'
import json, re, statistics, sys

readme, work = sys.argv[1], sys.argv[2]
v = {n: json.load(open(f"{work}/{n}/validation.json"))
     for n in ("lenet5", "lenet5-first", "cnn-cifar", "cnn-cifar-first", "vgg-mini",
               "vgg-mini-first")}
rows = {"lenet5, medians of 3": ["lenet5"], "lenet5, first run alone": ["lenet5-first"],
        "cnn-cifar, medians of 3": ["cnn-cifar"], "cnn-cifar, first run alone": ["cnn-cifar-first"],
        "vgg-mini, medians of 3": ["vgg-mini"], "vgg-mini, first run alone": ["vgg-mini-first"],
        "all, one run per point": ["lenet5-first", "cnn-cifar-first", "vgg-mini-first"],
        "all, by medians of 3": ["lenet5", "cnn-cifar", "vgg-mini"]}
text = open(readme).read()
if "**Measured again on" not in text:
    sys.exit(f"{readme}: no 'Measured again' paragraph")
# The table: the first lines starting with '|' after the paragraph's opening.
lines = text[text.index("**Measured again on"):].splitlines()
start = next(i for i, line in enumerate(lines) if line.startswith("|"))
end = next((i for i in range(start, len(lines)) if not lines[i].startswith("|")), len(lines))
table = "\n".join(lines[start:end])
failed = []
for label, parts in rows.items():
    m = re.search(r"^\| " + re.escape(label) + r" \|(.*)$", table, re.M)
    if not m:
        failed.append(f"{readme}: no row '{label}' in the 'Measured again' table")
        continue
    cells = [c.strip().strip("*").rstrip("%") for c in m.group(1).split("|")][:6]
    if len(cells) < 6 or not all(cells):
        failed.append(f"{readme} row '{label}': expected configurations, runs, mean, max, median "
                      f"and within 10%, found {cells}")
        continue
    errors = [abs(r["error_pct"]) for p in parts for r in v[p]["runs"]]
    got = {"configurations": (len(errors), int(cells[0])),
           "runs": (sum(v[p]["runs_measured"] for p in parts), int(cells[1])),
           "mean": (sum(errors) / len(errors), float(cells[2])),
           "max": (max(errors), float(cells[3])),
           "median": (statistics.median(errors), float(cells[4])),
           "within 10%": (sum(e <= 10 for e in errors), int(cells[5]))}
    for what, (measured, printed) in got.items():
        digits = len(cells[list(got).index(what)].partition(".")[2])
        if round(measured, digits) != printed:
            failed.append(f"{readme} row '{label}': {what} printed {printed}, "
                          f"validate gives {measured:.{digits + 2}f}")
    print(f"{label}: " + ", ".join(f"{k} {p}" for k, (_, p) in got.items()))
if failed:
    print("\n".join(failed), file=sys.stderr)
    print("the simulator's figures moved: validate docs/grid/ again (docs/grid/README.md) and "
          "rewrite the table and worst cases in docs/results/prediction-accuracy.md", file=sys.stderr)
    sys.exit(1)
PY
echo "PASS: the accuracy table in docs/results/prediction-accuracy.md is what validate gives on docs/grid/"
