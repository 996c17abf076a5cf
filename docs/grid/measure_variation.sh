#!/usr/bin/env bash
# The grid's profiles predate the profile's `variation` section (how runs on this host vary:
# psbed profile measures it from a run's own steps). The source runs' traces are not kept, so it
# is measured again from runs of the same configuration as each profile's source run (one worker,
# bsp, wfbp, 1 Gbit/s, the sweep's replayed compute and length), three of them, and the median
# of each figure is written into docs/grid/<model>/profile-host-<model>.json. Nothing else in the
# profiles changes, so the point predictions stay as they were; only the bands widen.
#   docs/grid/measure_variation.sh [PSBED] [WORK]     on an idle machine, about a minute
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
psbed="${1:-$here/../../build/release/cluster/psbed}"
work="${2:-$(mktemp -d)}"
data="${PSBED_DATA_DIR:-$here/../../data/mnist}"
for model in lenet5 cnn-cifar vgg-mini; do
  case $model in
    lenet5) args=(--data mnist --data-dir "$data" --steps 200) ;;
    cnn-cifar) args=(--data synthetic --steps 40) ;;
    vgg-mini) args=(--data synthetic --steps 30) ;;
  esac
  for r in 1 2 3; do
    out="$work/$model-r$r"
    rm -rf "$out"
    "$psbed" launch --workers 1 --servers 1 --model "$model" "${args[@]}" --batch 32 --lr 0.03 \
      --threads 1 --mode bsp --policy wfbp --bandwidth 1gbit --apply-threads 2 \
      --compute "replay:$here/$model/profile-$model.json" --out "$out" >"$out.log" 2>&1
    "$psbed" profile "$out" -o "$out.json" >/dev/null
  done
  /usr/bin/python3 - "$here/$model/profile-host-$model.json" "$work/$model"-r{1,2,3}.json <<'PY'
import json, statistics, sys
target, runs = sys.argv[1], [json.load(open(f)).get("variation", {}) for f in sys.argv[2:]]
v = {k: statistics.median(r.get(k, 0.0) for r in runs) for k in ("host_cv", "start_spread_ms")}
p = json.load(open(target))
p["variation"] = v
p.setdefault("source", {})["variation_runs"] = [
    {k: r.get(k, 0.0) for k in ("host_cv", "start_spread_ms")} for r in runs]
json.dump(p, open(target, "w"), indent=1, sort_keys=True)
open(target, "a").write("\n")
cvs = ", ".join(f"{r.get('host_cv', 0.0):.4f}" for r in runs)
print(f"{target}: host_cv {v['host_cv']:.4f} (runs: {cvs}), start_spread_ms {v['start_spread_ms']:.2f}")
PY
done
