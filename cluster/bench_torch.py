#!/usr/bin/python3
"""PyTorch CPU reference for the psbed compute benchmark.

Times full SGD training steps (zero_grad, forward, cross-entropy, backward,
SGD lr 0.01 momentum 0.9) of the same four small classifiers psbed trains with
oneDNN, on random data, for each requested thread count.

Run with Debian's interpreter, which is the only one that sees python3-torch:
    /usr/bin/python3 cluster/bench_torch.py [--models mlp,lenet5] [--threads 1,2] [--json out.json]

BLAS: Debian's torch is built with BLAS_INFO=generic and links libblas.so.3,
which the alternatives system resolves to OpenBLAS (libopenblas0-pthread,
priority 100) or to the slow reference BLAS (libblas3, priority 10). Linear
layers go through that BLAS (convolutions go through oneDNN). If the reference
BLAS is the one loaded, this script re-executes itself once with
LD_LIBRARY_PATH=/usr/lib/x86_64-linux-gnu/openblas-pthread so the dynamic
loader picks OpenBLAS's libblas.so.3 instead (no system change; disable with
--no-blas-fix). The permanent, system-wide switch is:
    sudo update-alternatives --set libblas.so.3-x86_64-linux-gnu \
        /usr/lib/x86_64-linux-gnu/openblas-pthread/libblas.so.3
OpenBLAS's pthread build keeps its own thread pool that torch.set_num_threads
does not touch, so the script also sets it to the thread count under test via
openblas_set_num_threads.
"""
import argparse
import ctypes
import json
import os
import re
import statistics
import sys
import time

OPENBLAS_DIR = "/usr/lib/x86_64-linux-gnu/openblas-pthread"
REEXEC_MARK = "PSBED_BENCH_TORCH_REEXEC"

EXPECTED_PARAMS = {
    "mlp": 535818,
    "lenet5": 61706,
    "cnn-cifar": 620362,
    "vgg-mini": 6400586,
}
ALL_MODELS = ["mlp", "lenet5", "cnn-cifar", "vgg-mini"]


def parse_args():
    p = argparse.ArgumentParser(description="PyTorch CPU training-step benchmark (psbed reference)")
    p.add_argument("--models", default=",".join(ALL_MODELS),
                   help="comma list of models (default: %(default)s)")
    p.add_argument("--threads", default="1,2", help="comma list of thread counts (default: %(default)s)")
    p.add_argument("--warmup", type=int, default=10, help="warm-up steps per configuration (default: %(default)s)")
    p.add_argument("--min-seconds", type=float, default=3.0,
                   help="time at least this long per configuration (default: %(default)s)")
    p.add_argument("--min-steps", type=int, default=20,
                   help="time at least this many steps per configuration (default: %(default)s)")
    p.add_argument("--json", metavar="PATH", help="write results as JSON to PATH")
    p.add_argument("--no-blas-fix", action="store_true",
                   help="do not re-exec with OpenBLAS when the reference BLAS is loaded")
    a = p.parse_args()
    a.models = [m.strip() for m in a.models.split(",") if m.strip()]
    for m in a.models:
        if m not in EXPECTED_PARAMS:
            p.error("unknown model %r (expected one of %s)" % (m, ", ".join(ALL_MODELS)))
    try:
        a.threads = [int(t) for t in a.threads.split(",") if t.strip()]
    except ValueError:
        p.error("--threads must be a comma list of integers")
    if not a.threads or any(t < 1 for t in a.threads):
        p.error("--threads must list positive integers")
    return a


# ---------------------------------------------------------------- BLAS detection

def loaded_libs():
    """Paths of shared objects mapped into this process (kernel-resolved, i.e. after symlinks)."""
    libs = []
    try:
        with open("/proc/self/maps") as f:
            for line in f:
                parts = line.split()
                if len(parts) >= 6 and parts[5].startswith("/") and ".so" in parts[5]:
                    if parts[5] not in libs:
                        libs.append(parts[5])
    except OSError:
        pass
    return libs


def blas_from_config(torch):
    cfg = torch.__config__.show()
    m = re.search(r"BLAS_INFO=([^,\s]+)", cfg)
    info = m.group(1) if m else "unknown"
    low = cfg.lower()
    if "mkl" == info or "Intel(R) Math Kernel Library" in cfg:
        return "mkl (BLAS_INFO=%s)" % info
    if "openblas" in low:
        return "openblas (BLAS_INFO=%s)" % info
    return "BLAS_INFO=%s" % info


def blas_from_maps():
    """Classify the BLAS actually loaded. Returns (kind, libblas_path, openblas_path)."""
    libs = loaded_libs()
    libblas = next((l for l in libs if re.search(r"/libblas\.so", l)), None)
    openblas = next((l for l in libs if re.search(r"/libopenblas[^/]*\.so", l)), None)
    mkl = next((l for l in libs if re.search(r"/libmkl_", l)), None)
    if mkl:
        kind = "mkl"
    elif libblas is not None:
        if "openblas" in libblas:
            kind = "openblas"
        elif "blis" in libblas:
            kind = "blis"
        elif "atlas" in libblas:
            kind = "atlas"
        else:
            kind = "reference"  # e.g. /usr/lib/x86_64-linux-gnu/blas/libblas.so.3 (netlib)
    elif openblas:
        kind = "openblas"
    else:
        kind = "unknown"
    return kind, libblas, openblas


class OpenBLAS:
    """ctypes handle on the already-loaded OpenBLAS, for thread control and its config string."""

    def __init__(self, path):
        self.lib = None
        if not path:
            return
        try:
            self.lib = ctypes.CDLL(path, mode=ctypes.RTLD_GLOBAL)
            self.lib.openblas_get_config.restype = ctypes.c_char_p
            self.lib.openblas_get_corename.restype = ctypes.c_char_p
        except (OSError, AttributeError):
            self.lib = None

    def set_threads(self, n):
        if self.lib is not None:
            self.lib.openblas_set_num_threads(int(n))

    def threads(self):
        return self.lib.openblas_get_num_threads() if self.lib is not None else None

    def config(self):
        if self.lib is None:
            return None
        try:
            return "%s, core %s" % (self.lib.openblas_get_config().decode().strip(),
                                    self.lib.openblas_get_corename().decode())
        except (AttributeError, UnicodeDecodeError):
            return None


def maybe_reexec_with_openblas(kind, no_fix):
    if kind != "reference" or no_fix or os.environ.get(REEXEC_MARK):
        return
    if not os.path.exists(os.path.join(OPENBLAS_DIR, "libblas.so.3")):
        return
    env = dict(os.environ)
    env["LD_LIBRARY_PATH"] = OPENBLAS_DIR + (":" + env["LD_LIBRARY_PATH"] if env.get("LD_LIBRARY_PATH") else "")
    env[REEXEC_MARK] = "1"
    print("bench_torch: reference BLAS loaded; re-executing with LD_LIBRARY_PATH=%s to use OpenBLAS" % OPENBLAS_DIR,
          file=sys.stderr, flush=True)
    os.execve(sys.executable, [sys.executable] + sys.argv, env)


def warn_reference_blas():
    bar = "!" * 78
    print(bar, file=sys.stderr)
    print("WARNING: PyTorch is using the REFERENCE (netlib) BLAS, not OpenBLAS.", file=sys.stderr)
    print("         Linear-layer timings will be several times too slow.", file=sys.stderr)
    if not os.path.exists(os.path.join(OPENBLAS_DIR, "libblas.so.3")):
        print("         Install OpenBLAS: sudo apt-get install libopenblas0-pthread", file=sys.stderr)
    print("         Switch system-wide: sudo update-alternatives --set libblas.so.3-x86_64-linux-gnu "
          "%s/libblas.so.3" % OPENBLAS_DIR, file=sys.stderr)
    print("         or per run:         LD_LIBRARY_PATH=%s /usr/bin/python3 %s ..." % (OPENBLAS_DIR, sys.argv[0]),
          file=sys.stderr)
    print(bar, file=sys.stderr, flush=True)


# ---------------------------------------------------------------- models

def build_model(nn, name):
    R = nn.ReLU
    if name == "mlp":
        return nn.Sequential(nn.Flatten(), nn.Linear(784, 512), R(), nn.Linear(512, 256), R(),
                             nn.Linear(256, 10)), (1, 28, 28), 64
    if name == "lenet5":
        return nn.Sequential(nn.Conv2d(1, 6, 5, padding=2), R(), nn.MaxPool2d(2, 2),
                             nn.Conv2d(6, 16, 5), R(), nn.MaxPool2d(2, 2),
                             nn.Flatten(), nn.Linear(400, 120), R(), nn.Linear(120, 84), R(),
                             nn.Linear(84, 10)), (1, 28, 28), 64
    if name == "cnn-cifar":
        layers = []
        for cin, cout in ((3, 32), (32, 64), (64, 128)):
            layers += [nn.Conv2d(cin, cout, 3, padding=1), R(), nn.MaxPool2d(2, 2)]
        layers += [nn.Flatten(), nn.Linear(2048, 256), R(), nn.Linear(256, 10)]
        return nn.Sequential(*layers), (3, 32, 32), 32
    if name == "vgg-mini":
        layers = []
        for cin, cout in ((3, 64), (64, 128), (128, 256)):
            layers += [nn.Conv2d(cin, cout, 3, padding=1), R(), nn.Conv2d(cout, cout, 3, padding=1), R(),
                       nn.MaxPool2d(2, 2)]
        layers += [nn.Flatten(), nn.Linear(4096, 1024), R(), nn.Linear(1024, 1024), R(), nn.Linear(1024, 10)]
        return nn.Sequential(*layers), (3, 32, 32), 32
    raise ValueError(name)


def bench_one(torch, model, shape, batch, args):
    nn = torch.nn
    x = torch.randn(batch, *shape)
    y = torch.randint(0, 10, (batch,))
    loss_fn = nn.CrossEntropyLoss()
    opt = torch.optim.SGD(model.parameters(), lr=0.01, momentum=0.9)

    def step():
        opt.zero_grad()
        loss = loss_fn(model(x), y)
        loss.backward()
        opt.step()
        return loss

    for _ in range(args.warmup):
        step()
    times = []
    t_start = time.perf_counter()
    while True:
        t0 = time.perf_counter()
        loss = step()
        t1 = time.perf_counter()
        times.append(t1 - t0)
        if len(times) >= args.min_steps and t1 - t_start >= args.min_seconds:
            break
    if not torch.isfinite(loss).item():
        print("bench_torch: warning: non-finite loss", file=sys.stderr)
    mean = statistics.fmean(times) if hasattr(statistics, "fmean") else sum(times) / len(times)
    return {
        "ms_per_step": mean * 1e3,
        "ms_per_step_median": statistics.median(times) * 1e3,
        "images_per_sec": batch / mean,
        "steps": len(times),
    }


# ---------------------------------------------------------------- main

def main():
    args = parse_args()
    try:
        import torch
    except ImportError:
        print("PyTorch not available: install Debian's python3-torch (make bench does) and run with /usr/bin/python3")
        return 3

    kind, libblas_path, openblas_path = blas_from_maps()
    maybe_reexec_with_openblas(kind, args.no_blas_fix)  # returns only when no re-exec happens
    cfg_blas = blas_from_config(torch)
    ob = OpenBLAS(openblas_path if kind == "openblas" else None)
    maps_desc = "%s (%s)" % (kind, libblas_path or openblas_path or "no BLAS library mapped")
    if kind == "reference":
        warn_reference_blas()

    try:
        torch.set_num_interop_threads(1)
    except RuntimeError:
        pass  # already set or parallel work has started

    mkldnn = bool(torch.backends.mkldnn.is_available())
    print("torch %s (%s), %d CPUs available" % (torch.__version__, sys.executable, len(os.sched_getaffinity(0))))
    print("BLAS from torch.__config__: %s" % cfg_blas)
    print("BLAS from /proc/self/maps:  %s" % maps_desc)
    if ob.config():
        print("OpenBLAS config:            %s" % ob.config())
    print("oneDNN/mkldnn available:    %s (convolutions use it; linear layers use the BLAS)" % mkldnn)
    print("interop threads:            %d" % torch.get_num_interop_threads())
    sys.stdout.flush()

    torch.manual_seed(0)
    rows = []
    hdr = "%-10s %7s %5s %10s %10s %10s %6s %8s" % ("model", "threads", "batch", "ms/step", "median ms",
                                                     "images/s", "steps", "blas thr")
    table = []
    for name in args.models:
        model, shape, batch = build_model(torch.nn, name)
        nparams = sum(p.numel() for p in model.parameters())
        print("%s: %d parameters" % (name, nparams), flush=True)
        assert nparams == EXPECTED_PARAMS[name], "%s has %d parameters, expected %d" % (
            name, nparams, EXPECTED_PARAMS[name])
        init_state = {k: v.clone() for k, v in model.state_dict().items()}
        for n in args.threads:
            model.load_state_dict(init_state)
            torch.set_num_threads(n)
            ob.set_threads(n)
            r = bench_one(torch, model, shape, batch, args)
            row = {"model": name, "threads": n, "batch": batch,
                   "ms_per_step": round(r["ms_per_step"], 4),
                   "ms_per_step_median": round(r["ms_per_step_median"], 4),
                   "images_per_sec": round(r["images_per_sec"], 2),
                   "steps": r["steps"]}
            rows.append(row)
            bt = ob.threads()
            line = "%-10s %7d %5d %10.3f %10.3f %10.1f %6d %8s" % (
                name, torch.get_num_threads(), batch, r["ms_per_step"], r["ms_per_step_median"],
                r["images_per_sec"], r["steps"], bt if bt is not None else "-")
            table.append(line)
            print("  " + line.strip(), flush=True)

    print()
    print(hdr)
    for line in table:
        print(line)

    if args.json:
        out = {"framework": "pytorch", "torch_version": torch.__version__, "blas": kind,
               "blas_config": cfg_blas, "blas_library": libblas_path or openblas_path,
               "openblas_config": ob.config(), "mkldnn": mkldnn, "rows": rows}
        with open(args.json, "w") as f:
            json.dump(out, f, indent=2)
            f.write("\n")
        print("wrote %s" % args.json)
    return 0


if __name__ == "__main__":
    sys.exit(main())
