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
Threads: "threads" is torch's intra-op (OpenMP) thread count, which oneDNN
convolutions and ATen element-wise kernels use. OpenBLAS's pthread build keeps
a second, private pool that torch.set_num_threads does not touch; with both
pools at 2 threads on a 2-core machine their spinning workers fight for the
cores (measured here: lenet5 5.5k vs 12k images/s, mlp 7.7k vs 23k, vgg-mini
136 vs 174). So by default OpenBLAS is pinned to 1 thread (via
openblas_set_num_threads) and all parallelism comes from torch's OpenMP pool;
--blas-threads match gives OpenBLAS the same count as torch instead.

Load from other processes wrecks OpenMP timings on a small machine (a spinning
barrier waits for a descheduled thread: 2-thread steps went from 5 ms to
~270 ms while a neighbour used one core). Each configuration therefore first
waits (up to --wait-quiet s) for the machine to be idle, measures the CPU
other processes used while it ran (other_cpu_pct, in % of one core), and is
repeated (up to --retries times) when that exceeds 20%.
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
    p.add_argument("--blas-threads", default="1",
                   help="OpenBLAS threads: an integer, or 'match' to use each --threads value (default: %(default)s)")
    p.add_argument("--wait-quiet", type=float, default=15.0, metavar="S",
                   help="wait up to S seconds for other processes to go idle before each configuration "
                        "(0: don't; default: %(default)s)")
    p.add_argument("--retries", type=int, default=1,
                   help="re-run a configuration up to this many times when other processes loaded the CPU "
                        "during it (default: %(default)s)")
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
    if a.blas_threads != "match":
        try:
            a.blas_threads = int(a.blas_threads)
            assert a.blas_threads >= 1
        except (ValueError, AssertionError):
            p.error("--blas-threads must be a positive integer or 'match'")
    return a


# ---------------------------------------------------------------- machine load

CLK_TCK = os.sysconf("SC_CLK_TCK")
CONTENDED_PCT = 20.0  # other processes' CPU, in % of one core, above which a measurement is suspect


def system_busy_seconds():
    """CPU seconds all processes have spent non-idle since boot (from /proc/stat)."""
    try:
        with open("/proc/stat") as f:
            v = [int(x) for x in f.readline().split()[1:]]
        return (sum(v[:8]) - v[3] - v[4]) / CLK_TCK  # all but idle, iowait (guest is already in user)
    except (OSError, ValueError, IndexError):
        return None


def own_cpu_seconds():
    t = os.times()
    return t.user + t.system


class LoadMeter:
    """CPU used by other processes while this one runs, in % of one core."""

    def __init__(self):
        self.sys0, self.own0, self.t0 = system_busy_seconds(), own_cpu_seconds(), time.perf_counter()

    def other_pct(self):
        sys1 = system_busy_seconds()
        if sys1 is None or self.sys0 is None:
            return None
        wall = time.perf_counter() - self.t0
        other = (sys1 - self.sys0) - (own_cpu_seconds() - self.own0)
        return max(0.0, 100.0 * other / wall) if wall > 0 else None


def wait_quiet(max_wait):
    """Wait until other processes use < 10% of one core over a 0.5 s window, for at most max_wait s."""
    if max_wait <= 0:
        return None
    deadline = time.perf_counter() + max_wait
    said = False
    while True:
        m = LoadMeter()
        time.sleep(0.5)
        pct = m.other_pct()
        if pct is None or pct < 10.0:
            return pct
        if time.perf_counter() >= deadline:
            print("bench_torch: machine still busy (other processes %.0f%% of a core); measuring anyway" % pct,
                  file=sys.stderr, flush=True)
            return pct
        if not said:
            print("bench_torch: other processes use %.0f%% of a core; waiting up to %.0f s for quiet"
                  % (pct, max_wait), file=sys.stderr, flush=True)
            said = True


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


def classify_blas(path):
    if not path:
        return "unknown"
    base = path.lower()
    for key, kind in (("mkl", "mkl"), ("openblas", "openblas"), ("blis", "blis"), ("atlas", "atlas")):
        if key in base:
            return kind
    if re.search(r"/libblas\.so", path):
        return "reference"  # e.g. /usr/lib/x86_64-linux-gnu/blas/libblas.so.3 (netlib reference BLAS)
    return "unknown"


def detect_blas():
    """What BLAS torch really calls. Decided by the library libtorch_cpu's sgemm_ resolves to; falls back to
    the libblas.so mapped into the process (kernel-resolved path, i.e. after the alternatives symlinks)."""
    libs = loaded_libs()
    libblas = next((l for l in libs if re.search(r"/libblas\.so", l)), None)
    openblas = next((l for l in libs if re.search(r"/libopenblas[^/]*\.so", l)), None)
    mkl = next((l for l in libs if re.search(r"/libmkl_", l)), None)
    provider = sgemm_provider()
    kind = classify_blas(provider or libblas or mkl or openblas)
    return {"kind": kind, "sgemm_from": provider, "libblas": libblas, "libopenblas": openblas,
            "mapped": [l for l in (libblas, openblas, mkl) if l]}


class _DlInfo(ctypes.Structure):
    _fields_ = [("dli_fname", ctypes.c_char_p), ("dli_fbase", ctypes.c_void_p),
                ("dli_sname", ctypes.c_char_p), ("dli_saddr", ctypes.c_void_p)]


def sgemm_provider():
    """Real path of the library that libtorch_cpu's sgemm_ resolves to (dlsym on its handle + dladdr)."""
    torch_lib = next((l for l in loaded_libs() if re.search(r"/libtorch_cpu\.so", l)), None)
    if not torch_lib:
        return None
    try:
        h = ctypes.CDLL(torch_lib)
        addr = ctypes.cast(h.sgemm_, ctypes.c_void_p).value
        libc = ctypes.CDLL(None)
        info = _DlInfo()
        libc.dladdr.argtypes = [ctypes.c_void_p, ctypes.POINTER(_DlInfo)]
        if addr and libc.dladdr(ctypes.c_void_p(addr), ctypes.byref(info)) and info.dli_fname:
            return os.path.realpath(info.dli_fname.decode())
    except (OSError, AttributeError, UnicodeDecodeError):
        pass
    return None


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

    blas = detect_blas()
    kind = blas["kind"]
    maybe_reexec_with_openblas(kind, args.no_blas_fix)  # returns only when no re-exec happens
    cfg_blas = blas_from_config(torch)
    ob = OpenBLAS((blas["sgemm_from"] or blas["libopenblas"]) if kind == "openblas" else None)
    maps_desc = "%s (mapped: %s; sgemm_ from %s)" % (kind, ", ".join(blas["mapped"]) or "no BLAS library",
                                                      blas["sgemm_from"] or "?")
    if os.environ.get(REEXEC_MARK):
        maps_desc += " [after re-exec with LD_LIBRARY_PATH=%s]" % OPENBLAS_DIR
    if kind == "reference":
        warn_reference_blas()

    default_threads = torch.get_num_threads()
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
    print("torch default threads:      %d intra-op (each row sets its own), %d inter-op"
          % (default_threads, torch.get_num_interop_threads()))
    print("OpenBLAS threads:           %s" % ("same as torch threads" if args.blas_threads == "match"
                                              else args.blas_threads if ob.lib is not None else "n/a"))
    sys.stdout.flush()

    torch.manual_seed(0)
    rows = []
    hdr = "%-10s %7s %8s %5s %10s %10s %10s %6s %7s" % ("model", "threads", "blas_thr", "batch", "ms/step",
                                                        "median ms", "images/s", "steps", "other%")
    table = []
    contended = []
    for name in args.models:
        model, shape, batch = build_model(torch.nn, name)
        nparams = sum(p.numel() for p in model.parameters())
        print("%s: %d parameters" % (name, nparams), flush=True)
        assert nparams == EXPECTED_PARAMS[name], "%s has %d parameters, expected %d" % (
            name, nparams, EXPECTED_PARAMS[name])
        init_state = {k: v.clone() for k, v in model.state_dict().items()}
        for n in args.threads:
            torch.set_num_threads(n)
            ob.set_threads(n if args.blas_threads == "match" else args.blas_threads)
            best = None
            for attempt in range(args.retries + 1):
                model.load_state_dict(init_state)  # same start for every run (fresh SGD state in bench_one)
                wait_quiet(args.wait_quiet)
                meter = LoadMeter()
                r = bench_one(torch, model, shape, batch, args)
                r["other"] = meter.other_pct()
                busy = r["other"] is not None and r["other"] > CONTENDED_PCT
                if best is None or (best["other"] or 0) > (r["other"] or 0):
                    best = r
                if not busy:
                    break
                print("bench_torch: %s threads=%d: other processes used %.0f%% of a core during the run (%.1f ms/step)%s"
                      % (name, n, r["other"], r["ms_per_step"],
                         "; retrying" if attempt < args.retries else ""), file=sys.stderr, flush=True)
            r = best
            other = None if r["other"] is None else round(r["other"], 1)
            if other is not None and other > CONTENDED_PCT:
                contended.append("%s/%d" % (name, n))
            bt = ob.threads()
            row = {"model": name, "threads": torch.get_num_threads(), "batch": batch,
                   "ms_per_step": round(r["ms_per_step"], 4),
                   "ms_per_step_median": round(r["ms_per_step_median"], 4),
                   "images_per_sec": round(r["images_per_sec"], 2),
                   "steps": r["steps"], "blas_threads": bt, "other_cpu_pct": other}
            rows.append(row)
            line = "%-10s %7d %8s %5d %10.3f %10.3f %10.1f %6d %7s" % (
                name, row["threads"], bt if bt is not None else "-", batch, r["ms_per_step"],
                r["ms_per_step_median"], r["images_per_sec"], r["steps"], "-" if other is None else "%.0f" % other)
            table.append(line)
            print("  " + line.strip(), flush=True)

    print()
    print(hdr)
    for line in table:
        print(line)
    print("threads = torch intra-op (OpenMP) threads; blas_thr = OpenBLAS threads; "
          "other% = CPU other processes used meanwhile (% of one core)")
    if contended:
        print("WARNING: other processes loaded the CPU during %s; those figures are too slow"
              % ", ".join(contended), file=sys.stderr)

    if args.json:
        out = {"framework": "pytorch", "torch_version": torch.__version__, "blas": kind,
               "blas_config": cfg_blas, "blas_library": blas["sgemm_from"] or blas["libblas"],
               "blas_threads": args.blas_threads,
               "openblas_config": ob.config(), "mkldnn": mkldnn, "rows": rows}
        with open(args.json, "w") as f:
            json.dump(out, f, indent=2)
            f.write("\n")
        print("wrote %s" % args.json)
    return 0


if __name__ == "__main__":
    sys.exit(main())
