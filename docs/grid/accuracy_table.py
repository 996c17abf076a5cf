#!/usr/bin/env python3
"""The "Measured again" table of docs/results/prediction-accuracy.md, from the recorded runs.

    python3 docs/grid/accuracy_table.py [PSBED] [--work DIR] [--figures FILE]

Runs `psbed validate` on each model's grid folder (docs/grid/README.md) and prints the markdown
table: per model, by the medians of each configuration's three runs and by its first run alone,
the point errors and the calibration (runs inside their band, the bands' median width, the
policy cells whose predicted-best policy is measured within 3% of the best, the median Kendall's
tau). PSBED defaults to build/release/cluster/psbed; --work keeps the validations in DIR (else
a temporary folder, removed); --figures writes the rows' figures as JSON. The first-run rows
come from the same validation: a configuration's prediction does not depend on its runs, and
its first run (the sweep point's own folder) is the first of measured_runs_images_per_sec.
"""
import argparse
import json
import math
import os
import shutil
import statistics
import subprocess
import sys
import tempfile

GRID = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(GRID))
MODELS = ["lenet5", "cnn-cifar", "vgg-mini"]
REGRET_WITHIN_PCT = 3  # predictor/calibration.hpp's kRegretWithinPct
# What a policy cell's configurations share (predictor/calibration.cpp's cell_key).
CELL_KEYS = ["workers", "servers", "mode", "steps", "recorded_steps", "bandwidth_bytes_per_sec",
             "latency_us", "recorded_link", "straggler_ms", "start_stagger_ms", "compute",
             "predicted_compute", "host_cpus", "partition_bytes", "apply_threads"]


def validate(psbed, model, work):
    folder = os.path.join(GRID, model)
    runs = sorted(os.path.join(folder, d) + "/" for d in os.listdir(folder)
                  if os.path.isdir(os.path.join(folder, d)))
    out = os.path.join(work, model)
    cmd = [psbed, "validate", "--profile", os.path.join(folder, f"profile-host-{model}.json"),
           *runs, "--out", out]
    print(f"validate {model}: {len(runs)} runs", file=sys.stderr)
    done = subprocess.run(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True,
                          timeout=600)
    if done.returncode != 0:
        sys.exit(f"validate {model} failed ({done.returncode}):\n{done.stderr[-3000:]}")
    with open(os.path.join(out, "validation.json")) as f:
        return json.load(f)


def tau_b(x, y):
    """Kendall's tau-b; None where undefined (predictor/calibration.cpp's kendall_tau_b)."""
    score = untied_x = untied_y = 0
    for i in range(len(x)):
        for j in range(i + 1, len(x)):
            sx = (x[i] > x[j]) - (x[i] < x[j])
            sy = (y[i] > y[j]) - (y[i] < y[j])
            score += sx * sy
            untied_x += sx != 0
            untied_y += sy != 0
    return score / math.sqrt(untied_x * untied_y) if untied_x and untied_y else None


def regret(predicted, measured):
    """% below the best measured of the policy predicted best (ties: the one measured lower)."""
    pick = max(range(len(predicted)), key=lambda i: (predicted[i], -measured[i]))
    best = max(measured)
    return 100 * (best - measured[pick]) / best if best > 0 else 0.0


def quantile(values, p):
    """numpy's default (linear) quantile, as predictor/band.cpp's."""
    s = sorted(values)
    at = p * (len(s) - 1)
    i = math.floor(at)
    return s[-1] if i + 1 >= len(s) else s[i] * (1 - (at - i)) + s[i + 1] * (at - i)


def configurations(v, first):
    """Each configuration: its prediction, band and the measurement(s) it is judged by."""
    out = []
    for r in v["runs"]:
        measured_runs = r["measured_runs_images_per_sec"][:1] if first else \
            r["measured_runs_images_per_sec"]
        measured = measured_runs[0] if first else r["measured_images_per_sec"]
        predicted = r["predicted_images_per_sec"]
        out.append({"cell": json.dumps([r.get(k) for k in CELL_KEYS]),
                    "predicted": predicted, "measured": measured, "runs": measured_runs,
                    "low": r["predicted_low"], "high": r["predicted_high"],
                    "width": r["predicted_band_width_pct"],
                    "error": 100 * (predicted - measured) / measured})
    return out


def figures(confs, runs_measured):
    """A row's figures over configurations (of one model or several: cells never span two)."""
    errors = [abs(c["error"]) for c in confs]
    runs = [m for c in confs for m in c["runs"]]
    inside = sum(c["low"] <= m <= c["high"] for c in confs for m in c["runs"])
    cells = {}
    for c in confs:
        cells.setdefault((c["model"], c["cell"]), []).append(c)
    regrets, taus = [], []
    for members in cells.values():
        if len(members) < 2:
            continue
        p = [c["predicted"] for c in members]
        m = [c["measured"] for c in members]
        regrets.append(regret(p, m))
        t = tau_b(p, m)
        if t is not None:
            taus.append(t)
    return {"configurations": len(confs), "runs": runs_measured,
            "mean_abs_error_pct": sum(errors) / len(errors), "median_abs_error_pct":
            statistics.median(errors), "p95_abs_error_pct": quantile(errors, 0.95),
            "max_abs_error_pct": max(errors), "within_10pct": sum(e <= 10 for e in errors),
            "runs_inside": inside, "coverage": inside / len(runs),
            "median_band_width_pct": statistics.median(c["width"] for c in confs),
            "cells": len(regrets),
            "cells_regret_within_3pct": sum(g <= REGRET_WITHIN_PCT for g in regrets),
            "median_kendall_tau": statistics.median(taus) if taus else None}


def row(label, f):
    tau = "-" if f["median_kendall_tau"] is None else f"{f['median_kendall_tau']:.2f}"
    return (f"| {label} | {f['configurations']} | {f['runs']} | {f['mean_abs_error_pct']:.2f}% | "
            f"{f['median_abs_error_pct']:.1f}% | {f['p95_abs_error_pct']:.1f}% | "
            f"{f['max_abs_error_pct']:.1f}% | {f['within_10pct']} | "
            f"{100 * f['coverage']:.1f}% | {f['median_band_width_pct']:.1f}% | "
            f"{f['cells_regret_within_3pct']} of {f['cells']} | {tau} |")


def table(validations):
    lines = ["| model | configurations | runs | mean \\|error\\| | median | p95 | max | within 10% "
             "| runs in their band | median band width | cells: predicted best within 3% "
             "| median tau |",
             "|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|"]
    rows = {}
    by_medians, by_first = [], []
    for model in MODELS:
        v = validations[model]
        medians = [dict(c, model=model) for c in configurations(v, first=False)]
        first = [dict(c, model=model) for c in configurations(v, first=True)]
        rows[f"{model}, medians of 3"] = figures(medians, v["runs_measured"])
        rows[f"{model}, first run alone"] = figures(first, len(first))
        by_medians += medians
        by_first += first
    rows["all, one run per point"] = figures(by_first, len(by_first))
    rows["all, by medians of 3"] = figures(
        by_medians, sum(validations[m]["runs_measured"] for m in MODELS))
    lines += [row(label, f) for label, f in rows.items()]
    return "\n".join(lines), rows


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("psbed", nargs="?", default=os.path.join(ROOT, "build/release/cluster/psbed"))
    ap.add_argument("--work", help="keep the validations in this folder")
    ap.add_argument("--figures", help="write the rows' figures here as JSON")
    a = ap.parse_args()
    if not os.access(a.psbed, os.X_OK):
        sys.exit(f"accuracy_table: no psbed binary at {a.psbed} (expected the path to psbed)")
    work = a.work or tempfile.mkdtemp(prefix="accuracy-table-")
    try:
        os.makedirs(work, exist_ok=True)
        validations = {m: validate(a.psbed, m, work) for m in MODELS}
        text, rows = table(validations)
    finally:
        if not a.work:
            shutil.rmtree(work, ignore_errors=True)
    if a.figures:
        with open(a.figures, "w") as f:
            json.dump(rows, f, indent=1)
    print(text)


if __name__ == "__main__":
    main()
