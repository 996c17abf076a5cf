#!/usr/bin/env python3
"""How close can any prediction come to the grid's measurements? The measurement's own noise floor.

Each configuration of docs/grid/ was run three times and is judged by the median of its runs. The
same configuration measured again gives another median, so part of any prediction's error is the
measurement's. This script says how much, from the recorded runs alone (no simulator involved):

1. Configurations measured twice over (the three runs of the grid, three more in extra/): the
   single prediction closest to both medians, and how far it still is from them. A figure above
   10% means that no prediction can be within 10% of both measurements of that configuration.
2. A perfect predictor (it names each configuration's true median) judged against medians of 3
   runs drawn as the testbed draws them, two ways: each configuration's runs log-normal with the
   spread its recorded runs show, and a bootstrap of its recorded runs. The max |error| over all
   configurations, and how often it stays within 10%.

Usage: python3 docs/grid/noise_floor.py [GRID_DIR]   (default: the folder of this script)
"""
import glob
import json
import math
import os
import random
import re
import statistics as st
import sys

GRID = sys.argv[1] if len(sys.argv) > 1 else os.path.dirname(os.path.abspath(__file__))
MODELS = ("lenet5", "cnn-cifar", "vgg-mini")
DRAWS = 2000


def point(folder):  # a run's configuration: its folder less the repeat's -rN
    return re.sub(r"-r\d+$", "", os.path.basename(folder.rstrip("/")))


def ips(folder):
    return json.load(open(os.path.join(folder, "summary.json")))["images_per_sec"]


runs = {}  # (model, point) -> images/s of each run in the grid
for m in MODELS:
    for d in sorted(glob.glob(os.path.join(GRID, m, "*/"))):
        runs.setdefault((m, point(d)), []).append(ips(d))
again = {}  # (model, point) -> images/s of each run measured again, in extra/
for group in sorted(glob.glob(os.path.join(GRID, "extra", "*/"))):
    model = next(m for m in MODELS if os.path.basename(group.rstrip("/")).startswith(m + "-"))
    for d in sorted(glob.glob(os.path.join(group, "*/"))):
        again.setdefault((model, point(d)), []).append(ips(d))
print(f"{len(runs)} configurations, {sum(map(len, runs.values()))} runs; {len(again)} measured again")

print("\n1. Measured twice over: the prediction closest to both medians of 3")
for key, second in sorted(again.items()):
    m1, m2 = st.median(runs[key]), st.median(second)
    best = 2 * m1 * m2 / (m1 + m2)  # equal relative error to both
    off = abs(m2 - m1) / (m1 + m2) * 100
    print(f"  {key[0]:9} {key[1]:28} medians {m1:7.0f} and {m2:7.0f}: {best:7.0f} is {off:4.1f}% from both"
          + ("  (no prediction within 10% of both)" if off > 10 else ""))


def perfect(draw_median):
    random.seed(1)
    worst, over, means = [], [], []
    for _ in range(DRAWS):
        errs = [abs(e) for e in (draw_median(k) for k in runs)]
        worst.append(max(errs))
        over.append(sum(e > 10 for e in errs))
        means.append(sum(errs) / len(errs))
    worst.sort()
    return (f"max |error| median {worst[DRAWS // 2]:.1f}% (5-95%: {worst[DRAWS // 20]:.1f}-"
            f"{worst[DRAWS * 19 // 20]:.1f}%), within 10% in {100 * sum(w <= 10 for w in worst) / DRAWS:.1f}% "
            f"of draws; mean |error| {st.median(means):.2f}%; configurations over 10%: {st.median(over):.0f}")


every = {k: v + again.get(k, []) for k, v in runs.items()}
sd = {k: st.stdev(math.log(x) for x in v) for k, v in every.items()}


def lognormal(key):  # true median 1; the measured median of 3 draws; error of predicting 1
    med = sorted(math.exp(random.gauss(0, sd[key])) for _ in range(3))[1]
    return (1 - med) / med * 100


def bootstrap(key):  # true median: that of every recorded run; 3 of them drawn again
    v = every[key]
    med = sorted(random.choice(v) for _ in range(3))[1]
    return (st.median(v) - med) / med * 100


print(f"\n2. A perfect predictor against medians of 3 runs ({DRAWS} draws of the whole grid)")
print("  log-normal runs: " + perfect(lognormal))
print("  bootstrap:       " + perfect(bootstrap))
