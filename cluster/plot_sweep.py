#!/usr/bin/python3
"""Plots a psbed sweep: images/s against workers, one line per policy, one panel per
(mode, bandwidth); with repeats, the line goes through each point's median and a bar spans
its runs. Usage: plot_sweep.py results.csv sweep.png"""
import csv
import os
import statistics
import sys
from collections import defaultdict

try:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
except ImportError as e:  # one line, not a traceback (3: psbed sweep says it, and what to install)
    if os.environ.get("PSBED_SWEEP") != "1":
        print(f"plot_sweep: no plot: matplotlib cannot be imported ({e}); Debian's python3-matplotlib",
              file=sys.stderr)
    sys.exit(3)


def main(src, dst):
    rows = [r for r in csv.DictReader(open(src)) if r["ok"] == "1"]
    if not rows:
        print("plot_sweep: no finished runs in " + src, file=sys.stderr)
        return 1
    panels = sorted({(r["mode"], r["bandwidth"]) for r in rows})
    fig, axes = plt.subplots(1, len(panels), figsize=(5.5 * len(panels), 4.2), squeeze=False)
    for ax, (mode, bw) in zip(axes[0], panels):
        lines = defaultdict(lambda: defaultdict(list))
        for r in rows:
            if (r["mode"], r["bandwidth"]) == (mode, bw):
                lines[(r["policy"], r["servers"])][int(r["workers"])].append(float(r["images_per_sec"]))
        for (policy, servers), by_w in sorted(lines.items()):
            ws = sorted(by_w)
            mid = [statistics.median(by_w[w]) for w in ws]
            label = policy if len({k[1] for k in lines}) == 1 else "%s, %s server(s)" % (policy, servers)
            line = ax.plot(ws, mid, marker="o", label=label)[0]
            if any(len(by_w[w]) > 1 for w in ws):
                ax.errorbar(ws, mid, yerr=[[m - min(by_w[w]) for w, m in zip(ws, mid)],
                                           [max(by_w[w]) - m for w, m in zip(ws, mid)]],
                            fmt="none", ecolor=line.get_color(), capsize=3, alpha=0.7)
        ax.set_title("%s, %s" % (mode, bw))
        ax.set_xlabel("workers")
        ax.set_ylabel("images/s (all workers)")
        ax.set_xscale("log", base=2)
        ax.set_xticks(sorted({int(r["workers"]) for r in rows}))
        ax.get_xaxis().set_major_formatter(matplotlib.ticker.ScalarFormatter())
        ax.grid(True, alpha=0.3)
        ax.legend(fontsize=8)
    model = rows[0]["model"]
    fig.suptitle("%s, compute %s" % (model, rows[0]["compute"]))
    fig.tight_layout()
    fig.savefig(dst, dpi=110)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1], sys.argv[2]))
