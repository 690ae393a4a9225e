#!/usr/bin/env python3
"""fully_connected's GEMMs against every library at hand and PyTorch's torch.mm, in alternating rounds.

    python3 tools/gemm_vs_pytorch.py [--bench build/bench_ops] [--python PATH] [--threads 2]
                                     [--rounds 3] [--min-time 0.3] [--mkl]

Each round runs bench_ops' `fc/` benchmarks (the registered op, Eigen, oneDNN's sgemm and matmul
primitive, MKL when bench_ops was built with it) and then the same three products in PyTorch
(F.linear(x, w, b) for the forward, torch.mm for dy w and dy^T x), on the same shapes and thread
count. Prints, per shape and pass, the median GFLOP/s over the rounds of every column, the op's
ratio to PyTorch with every round's ratio, and the fastest library.

The MKL column appears when the build has MKL (scripts/build.sh installs PyPI's mkl-devel into
BUILD/venv-mkl and builds with it unless MNEMO_MKL=0; the op's backward products then use it too).
--mkl: install it there and rebuild now (cmake -DMNEMO_MKL_ROOT; GNU OpenMP threading, as mnemo's). --python (default $TORCH_PYTHON or
/work/venv-torch/bin/python) must import torch; create it with
    python3 -m venv /work/venv-torch && /work/venv-torch/bin/pip install torch numpy
"""
import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))

PASSES = ["fwd", "bwd_data", "bwd_weight"]


def shapes_of(rates):
    """(N rows, D inputs, M outputs) of bench_ops' fc/NxD->M/... benchmarks, in their order: the
    shapes come from bench_ops (kFcShapes), not from a second list here."""
    shapes = []
    for name in rates:
        n, rest = name.split("/")[1].split("x")
        d, m = rest.split("->")
        if (int(n), int(d), int(m)) not in shapes:
            shapes.append((int(n), int(d), int(m)))
    return shapes

TORCH_BENCH = r"""
import json, sys, time, torch
import torch.nn.functional as F
threads, min_time, shapes = int(sys.argv[1]), float(sys.argv[2]), json.loads(sys.argv[3])
torch.set_num_threads(threads)
torch.manual_seed(0)
out = {}
def rate(fn, flops):
    for _ in range(3): fn()
    n, t0 = 0, time.perf_counter()
    while True:
        fn(); n += 1
        el = time.perf_counter() - t0
        if el >= min_time: return flops * n / el / 1e9
with torch.no_grad():
    for n, d, m in shapes:
        x, w, b, dy = torch.randn(n, d), torch.randn(m, d), torch.randn(m), torch.randn(n, m)
        y, dx, dw = torch.empty(n, m), torch.empty(n, d), torch.empty(m, d)
        name = f"{n}x{d}->{m}"
        # the forward's flops as mnemo's cost model counts them: the GEMM plus the bias add
        out[f"fc/{name}/fwd"] = rate(lambda: torch.addmm(b, x, w.t(), out=y), 2.0 * n * m * d + n * m)
        out[f"fc/{name}/bwd_data"] = rate(lambda: torch.mm(dy, w, out=dx), 2.0 * n * m * d)
        out[f"fc/{name}/bwd_weight"] = rate(lambda: torch.mm(dy.t(), x, out=dw), 2.0 * n * m * d)
print(json.dumps({"torch": torch.__version__, "rates": out}))
"""


def die(msg):
    print(f"gemm_vs_pytorch: {msg}", file=sys.stderr)
    sys.exit(1)


def build_with_mkl(bench):
    """Installs PyPI's mkl-devel into BUILD/venv-mkl and rebuilds BUILD/bench_ops with it (the build
    folder of --bench; only bench_ops links MKL, nothing else in the build changes)."""
    build = os.path.dirname(os.path.abspath(bench))
    if not os.path.isfile(os.path.join(build, "CMakeCache.txt")):
        die(f"--mkl: '{build}' is not a configured build folder; build mnemo first (bash scripts/build.sh)")
    venv = os.path.join(build, "venv-mkl")
    if not os.path.exists(os.path.join(venv, "bin", "pip")):
        print("gemm_vs_pytorch: creating", venv, flush=True)
        subprocess.run([sys.executable, "-m", "venv", venv], check=True)
    if not any(f.startswith("libmkl_core.so") for f in os.listdir(os.path.join(venv, "lib"))):
        print("gemm_vs_pytorch: installing mkl-devel into", venv, flush=True)
        subprocess.run([os.path.join(venv, "bin", "pip"), "install", "-q", "mkl-devel"], check=True)
    subprocess.run(["cmake", "-S", ROOT, "-B", build, f"-DMNEMO_MKL_ROOT={venv}"], check=True,
                   stdout=subprocess.DEVNULL)
    print("gemm_vs_pytorch: building bench_ops with MKL in", build, flush=True)
    subprocess.run(["ninja", "-C", build, "bench_ops"], check=True, stdout=subprocess.DEVNULL)
    return bench


def run_bench(bench, threads, min_time):
    with tempfile.NamedTemporaryFile(suffix=".json") as f:
        env = dict(os.environ, OMP_NUM_THREADS=str(threads))
        r = subprocess.run([bench, f"--threads={threads}", "--benchmark_filter=^fc/",
                            f"--benchmark_min_time={min_time}", f"--benchmark_out={f.name}",
                            "--benchmark_out_format=json"], env=env, stdout=subprocess.DEVNULL,
                           stderr=subprocess.PIPE, text=True)
        if r.returncode != 0:
            die(f"{bench} failed (exit {r.returncode}): {r.stderr.strip()[-2000:]}")
        data = json.load(open(f.name))
    rates = {}
    for b in data["benchmarks"]:
        name = b["name"].split("/real_time")[0].split("/min_time")[0]
        if "GFLOP/s" not in b:
            die(f"{bench}: benchmark {name} has no GFLOP/s counter")
        rates[name] = b["GFLOP/s"]
    return rates


def run_torch(python, threads, min_time, shapes):
    env = dict(os.environ, OMP_NUM_THREADS=str(threads))
    r = subprocess.run([python, "-c", TORCH_BENCH, str(threads), str(min_time), json.dumps(shapes)],
                       env=env, capture_output=True, text=True)
    if r.returncode != 0:
        die(f"PyTorch benchmark with {python} failed (exit {r.returncode}): {r.stderr.strip()[-2000:]}")
    return json.loads(r.stdout.strip().splitlines()[-1])


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--bench", default=os.path.join(ROOT, "build", "bench_ops"))
    ap.add_argument("--python", default=os.environ.get("TORCH_PYTHON", "/work/venv-torch/bin/python"))
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--min-time", type=float, default=0.3)
    ap.add_argument("--mkl", action="store_true", help="rebuild bench_ops with MKL (mkl-devel from PyPI)")
    a = ap.parse_args()
    if a.threads < 1 or a.rounds < 1 or not a.min_time > 0:
        die("--threads and --rounds must be >= 1 and --min-time > 0")
    bench = build_with_mkl(a.bench) if a.mkl else a.bench
    if not (os.path.isfile(bench) and os.access(bench, os.X_OK)):
        die(f"no bench_ops at '{bench}'; build it first (bash scripts/build.sh)")
    if not (os.path.isfile(a.python) and os.access(a.python, os.X_OK)):
        die(f"no Python at '{a.python}'; create it with: python3 -m venv /work/venv-torch && "
            "/work/venv-torch/bin/pip install torch numpy (or pass --python)")

    ours, theirs, version = [], [], None
    for r in range(a.rounds):
        print(f"round {r + 1}/{a.rounds}: bench_ops, then PyTorch", flush=True)
        ours.append(run_bench(bench, a.threads, a.min_time))
        t = run_torch(a.python, a.threads, a.min_time, shapes_of(ours[0]))
        version = t["torch"]
        theirs.append(t["rates"])

    libs = sorted({k.rsplit("/", 1)[1] for k in ours[0]} - {"op"}, key=lambda s: ["eigen", "onednn_sgemm",
                                                                                   "onednn_matmul", "mkl"].index(s))
    print(f"\nGFLOP/s, medians of {a.rounds} alternating round(s), {a.threads} thread(s), PyTorch {version}; "
          "`op` is mnemo's registered fully_connected pass (fwd with its bias add)\n")
    print("| shape | pass | op | " + " | ".join(libs) + " | torch | op / torch (every round) |")
    print("|---|---|---:|" + "---:|" * len(libs) + "---:|---|")
    worst = None
    for n, d, m in shapes_of(ours[0]):
        for p in PASSES:
            key = f"fc/{n}x{d}->{m}/{p}"
            med = lambda rows, k: statistics.median(row[k] for row in rows)
            op, torch = med(ours, key + "/op"), med(theirs, key)
            per_round = [o[key + "/op"] / t[key] for o, t in zip(ours, theirs)]
            ratio = statistics.median(per_round)
            worst = ratio if worst is None else min(worst, ratio)
            cells = " | ".join(f"{med(ours, key + '/' + lib):.1f}" for lib in libs)
            print(f"| {n}x{d}->{m} | {p} | {op:.1f} | {cells} | {torch:.1f} | **{ratio:.2f}x** "
                  f"({', '.join(f'{x:.2f}' for x in per_round)}) |")
    print(f"\nleast op / torch ratio (median over rounds): {worst:.2f}x (target >= 1.0x)")


if __name__ == "__main__":
    main()
