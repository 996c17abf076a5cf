import json, sys
try:
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.patches
    import matplotlib.pyplot as plt
except ImportError:
    print("matplotlib is not installed (cluster/install-deps.sh plot): no plot", file=sys.stderr)
    sys.exit(3)
v = json.load(open(sys.argv[1]))
runs = v["runs"]
# One panel per (mode, bandwidth); in it one line per configuration, varying in workers only: a
# line for the prediction, points for the measurements. Lines of one policy share its colour;
# where configurations differ in more than policy, mode and bandwidth (slice, credit, servers,
# latency, ...), each line has its own style and a label naming what sets it apart.
SETTINGS = [("policy", "%s"), ("slice_params", "slice %s"), ("partition_params", "partition %s"),
            ("credit_bytes", "credit %s bytes"), ("servers", "%s servers"), ("latency_us", "%s us"),
            ("straggler_ms", "straggler %s ms"), ("start_stagger_ms", "stagger %s ms"),
            ("steps", "%s steps"), ("predicted_compute", "%s compute"), ("partition_bytes", "parts %s bytes"),
            ("apply_threads", "%s apply threads"), ("host_cpus", "%s cores"),
            ("recorded_bandwidth_bytes_per_sec", "ran at %s bytes/s"), ("recorded_latency_us", "ran at %s us")]
SIMULATED = {"recorded_bandwidth_bytes_per_sec": "bandwidth_bytes_per_sec", "recorded_latency_us": "latency_us"}
# A setting tells configurations apart where two rows of one panel, policy and worker count differ
# in it; one that changes only with the worker count (the steps of an --epochs run) does not.
def differs_at_one_size(k):
    seen = {}
    for r in runs:
        at = (r["mode"], r["bandwidth"], r["policy"], r["workers"])
        seen.setdefault(at, set()).add(json.dumps(r.get(k)))
    return any(len(v) > 1 for v in seen.values())
IDENTITY = [(k, name) for k, name in SETTINGS if k == "policy" or differs_at_one_size(k)]
def config(r):
    return tuple(json.dumps(r.get(k)) for k, _ in IDENTITY)
def value(x):
    return ("%g" % x) if isinstance(x, float) else str(x)
policies = sorted({r["policy"] for r in runs})
# A setting goes in the labels where it tells two lines of one policy apart.
varying = [(k, name) for k, name in IDENTITY[1:]
           if len({(r["policy"], json.dumps(r.get(k))) for r in runs}) > len(policies)]
def label(r):
    # A recorded link is named only where the prediction replaced it.
    parts = [r["policy"]] + [name % value(r[k]) for k, name in varying
                             if r.get(k) is not None and r.get(k) != r.get(SIMULATED.get(k))]
    return ", ".join(parts)
panels = sorted({(r["mode"], r["bandwidth"]) for r in runs})
colour = {p: "C%d" % (i % 10) for i, p in enumerate(policies)}
styles = [("-", "o"), ("--", "s"), (":", "^"), ("-.", "D"), ((0, (5, 1, 1, 1)), "v"), ((0, (1, 3)), "P")]
lines = {}  # configuration -> (colour, line style, marker, label), the same in every panel
for r in sorted(runs, key=lambda r: (r["policy"], config(r))):
    c = config(r)
    if c not in lines:
        k = sum(1 for x in lines.values() if x[0] == colour[r["policy"]])
        lines[c] = (colour[r["policy"]],) + styles[k % len(styles)] + (label(r),)
# The legend: beside the panels, or where lines carry labels, in columns below them.
columns = 3 if varying else 1
legend_rows = -(-(len(lines) + 2) // columns) if varying else 0
legend_in = 0 if varying else 1.5  # inches beside the panels
below_in = 0.25 * legend_rows + 0.2 if varying else 0  # inches below them
fig, axes = plt.subplots(1, len(panels), figsize=(5.5 * len(panels) + legend_in, 4.2 + below_in), squeeze=False)
for ax, (mode, bw) in zip(axes[0], panels):
    for c, (col, ls, marker, _) in lines.items():
        rs = sorted((r for r in runs if (r["mode"], r["bandwidth"]) == (mode, bw) and config(r) == c),
                    key=lambda r: r["workers"])
        if not rs:
            continue
        xs = [r["workers"] for r in rs]
        ax.plot(xs, [r["predicted_images_per_sec"] for r in rs], linestyle=ls, color=col)
        # The band one run should land in (an older report has none: the prediction alone).
        ax.fill_between(xs, [r.get("predicted_low", r["predicted_images_per_sec"]) for r in rs],
                        [r.get("predicted_high", r["predicted_images_per_sec"]) for r in rs],
                        color=col, alpha=0.15, linewidth=0)
        # Every run of a configuration, not only their median: which fall outside the band.
        each = [(r["workers"], m) for r in rs
                for m in r.get("measured_runs_images_per_sec", [r["measured_images_per_sec"]])]
        ax.plot([x for x, _ in each], [m for _, m in each], marker, color=col, alpha=0.7,
                markersize=4)
    ax.set_title("%s, %s" % (mode, bw))
    ax.set_xlabel("workers")
    ax.set_xticks(sorted({r["workers"] for r in runs if (r["mode"], r["bandwidth"]) == (mode, bw)}))
    ax.set_ylabel("images/s (all workers)")
    ax.grid(alpha=0.3)
if varying:
    handles = [plt.Line2D([], [], color=col, linestyle=ls, marker=m, label=text)
               for col, ls, m, text in lines.values()]
else:
    handles = [plt.Line2D([], [], color=colour[p], marker="o", label=p) for p in policies]
handles += [plt.Line2D([], [], color="grey", label="predicted"),
            matplotlib.patches.Patch(color="grey", alpha=0.15, label="band (5-95% of draws)"),
            plt.Line2D([], [], color="grey", marker="o", linestyle="", label="measured runs")]
fig.legend(handles=handles, loc="lower center" if varying else "center right", ncol=columns, fontsize=8)
cal = v.get("calibration") or {}
inside = (", %d%% of runs in their band" % round(100 * cal["coverage"])
          if cal.get("coverage") is not None else "")
fig.suptitle("predicted (lines, bands) and measured runs (points); mean |error| %.1f%%, max %.1f%%%s"
             % (v["mean_abs_error_pct"], v["max_abs_error_pct"], inside))
fig.tight_layout(rect=(0, below_in / (4.2 + below_in), 1 - max(0, legend_in - 0.1) / (5.5 * len(panels) + legend_in), 1))
fig.savefig(sys.argv[2], dpi=120)
