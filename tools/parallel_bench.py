#!/usr/bin/env python3
"""Data parallelism on this machine: N ranks x 1 thread (mpirun) against 1 rank x N threads, in
alternating rounds, with the communication time per step and the share of it hidden behind the
backward pass (what `mnemo train` prints under mpirun; docs/PARALLEL.md).

    python3 tools/parallel_bench.py [CONFIG] [--ranks 2] [--rounds 3] [--steps 20] [--bucket-bytes B]
    python3 tools/parallel_bench.py [CONFIG] --one-rank [--mpi] [--threads 2] [--device cuda] ...

--one-rank: the overhead of the reduction path instead: one plain process against one process with
parallel.reduce_one_rank (the same step with its all-reduce nodes; on a GPU, --device cuda, their
NCCL gathers over one rank; with --mpi under `mpirun -np 1`, the host gathers over MPI), both with
--threads threads.

Each variant trains CONFIG for --steps steps on the same global batch (`data.batch`), without
evaluation; the time is `mnemo train`'s s/step over the run. Prints every round and the medians.
Run from the repository root after scripts/build.sh.
"""
import argparse
import os
import re
import statistics
import subprocess
import tempfile

ap = argparse.ArgumentParser()
ap.add_argument("config", nargs="?", default="configs/resnet56-cifar.yaml")
ap.add_argument("--ranks", type=int, default=2)
ap.add_argument("--rounds", type=int, default=3)
ap.add_argument("--steps", type=int, default=20)
ap.add_argument("--bucket-bytes", type=int, default=0, help="parallel.bucket_bytes (0: the config's)")
ap.add_argument("--mnemo", default="./build/mnemo")
ap.add_argument("--one-rank", action="store_true", help="plain process against one with parallel.reduce_one_rank")
ap.add_argument("--threads", type=int, default=2, help="--one-rank: threads of both variants")
ap.add_argument("--device", default="", help="--device for mnemo train (e.g. cuda)")
ap.add_argument("--eager", action="store_true", help="--eager for mnemo train (a GPU step launched node by node, not replayed)")
ap.add_argument("--mpi", action="store_true", help="--one-rank: the reduce_one_rank process under mpirun -np 1")
a = ap.parse_args()


def with_parallel(keys):
    """CONFIG with its parallel section (flow or block form) replaced by `keys` (a temporary file)."""
    text = re.sub(r"(?m)^parallel:.*\n(?:[ \t]+.*\n)*", "", open(a.config).read())
    tmp = tempfile.NamedTemporaryFile("w", suffix=".yaml", delete=False)
    tmp.write(text + "\nparallel: {" + ", ".join(keys) + "}\n")
    tmp.close()
    return tmp.name


keys = [f"bucket_bytes: {a.bucket_bytes}"] if a.bucket_bytes else []
config = with_parallel(keys) if keys else a.config

env = dict(os.environ, OMPI_ALLOW_RUN_AS_ROOT="1", OMPI_ALLOW_RUN_AS_ROOT_CONFIRM="1")


def run(ranks, cfg=None, force_mpi=False, threads=None):
    threads = threads or a.ranks // ranks
    cmd = [a.mnemo, "train", cfg or config, "--steps", str(a.steps), "--no-eval"] + (["--device", a.device] if a.device else []) + (["--eager"] if a.eager else [])
    if ranks > 1 or force_mpi:
        cmd = ["mpirun", "--oversubscribe", "--bind-to", "none", "-np", str(ranks), "-x", f"OMP_NUM_THREADS={threads}"] + cmd
    out = subprocess.run(cmd, capture_output=True, text=True, env=dict(env, OMP_NUM_THREADS=str(threads)))
    if out.returncode != 0:
        raise SystemExit(f"{' '.join(cmd)} failed:\n{out.stdout[-2000:]}\n{out.stderr[-2000:]}")
    s = float(re.search(r"\(([0-9.]+) s/step\)", out.stdout).group(1))
    m = re.search(r"per rank and step ([0-9.]+) s of gathers, ([0-9.]+) s of them waited for: ([0-9.]+)% hidden", out.stdout)
    return s, (float(m.group(1)), float(m.group(2)), float(m.group(3))) if m else None


if a.one_rank:
    reduce_cfg = with_parallel(keys + ["reduce_one_rank: true"])
    plain, reduced = [], []
    for r in range(a.rounds):
        first, second = (False, True) if r % 2 == 0 else (True, False)
        t = {}
        for red in (first, second):
            t[red] = run(1, reduce_cfg if red else config, force_mpi=red and a.mpi, threads=a.threads)
        plain.append(t[False][0]), reduced.append(t[True][0])
        c = t[True][1]
        print(f"round {r + 1}: plain {t[False][0]:.4f} s/step; reduce_one_rank{' (mpirun -np 1)' if a.mpi else ''} {t[True][0]:.4f} s/step "
              f"({t[True][0] / t[False][0]:.3f}x); gathers {c[0]:.4f} s/step, waited {c[1]:.4f} s/step", flush=True)
    ratios = [x / y for x, y in zip(reduced, plain)]
    print()
    print(f"{a.config}, {a.threads} threads, {a.steps} steps, {a.rounds} alternating rounds (medians):")
    print("| variant | s/step | ratio | rounds |")
    print("|---|---:|---:|---|")
    print(f"| plain (one process) | {statistics.median(plain):.4f} | 1.000 | {', '.join(f'{x:.4f}' for x in plain)} |")
    print(f"| reduce_one_rank{' (mpirun -np 1)' if a.mpi else ''} | {statistics.median(reduced):.4f} | {statistics.median(ratios):.3f} | "
          f"{', '.join(f'{x:.4f}' for x in reduced)} (ratios {', '.join(f'{x:.3f}' for x in ratios)}) |")
    raise SystemExit(0)

one, many, comm = [], [], []
for r in range(a.rounds):
    s1, _ = run(1)
    sn, c = run(a.ranks)
    one.append(s1), many.append(sn), comm.append(c)
    print(f"round {r + 1}: 1 rank x {a.ranks} threads {s1:.3f} s/step; {a.ranks} ranks x 1 thread {sn:.3f} s/step "
          f"({sn / s1:.3f}x); gathers {c[0]:.4f} s/step, waited {c[1]:.4f} s/step, {c[2]:.1f}% hidden", flush=True)
print()
print(f"{config}, {a.steps} steps, {a.rounds} alternating rounds (medians):")
print(f"| variant | s/step | ratio | rounds |")
print(f"|---|---:|---:|---|")
print(f"| 1 rank x {a.ranks} threads | {statistics.median(one):.3f} | 1.000 | {', '.join(f'{x:.3f}' for x in one)} |")
print(f"| {a.ranks} ranks x 1 thread | {statistics.median(many):.3f} | {statistics.median([m / o for m, o in zip(many, one)]):.3f} | "
      f"{', '.join(f'{x:.3f}' for x in many)} |")
print(f"communication per rank and step: gathers {statistics.median([c[0] for c in comm]):.4f} s, waited for "
      f"{statistics.median([c[1] for c in comm]):.4f} s, hidden {statistics.median([c[2] for c in comm]):.1f}% "
      f"(rounds: {', '.join(f'{c[2]:.1f}%' for c in comm)})")
