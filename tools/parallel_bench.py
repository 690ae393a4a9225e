#!/usr/bin/env python3
"""Data parallelism on this machine: N ranks x 1 thread (mpirun) against 1 rank x N threads, in
alternating rounds, with the communication time per step and the share of it hidden behind the
backward pass (what `mnemo train` prints under mpirun; docs/PARALLEL.md).

    python3 tools/parallel_bench.py [CONFIG] [--ranks 2] [--rounds 3] [--steps 20] [--bucket-bytes B]

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
a = ap.parse_args()

config = a.config
if a.bucket_bytes:
    tmp = tempfile.NamedTemporaryFile("w", suffix=".yaml", delete=False)
    text = open(a.config).read()
    tmp.write(text + f"\nparallel: {{bucket_bytes: {a.bucket_bytes}}}\n")
    tmp.close()
    config = tmp.name

env = dict(os.environ, OMPI_ALLOW_RUN_AS_ROOT="1", OMPI_ALLOW_RUN_AS_ROOT_CONFIRM="1")


def run(ranks):
    threads = a.ranks // ranks
    cmd = [a.mnemo, "train", config, "--steps", str(a.steps), "--no-eval"]
    if ranks > 1:
        cmd = ["mpirun", "--oversubscribe", "--bind-to", "none", "-np", str(ranks), "-x", f"OMP_NUM_THREADS={threads}"] + cmd
    out = subprocess.run(cmd, capture_output=True, text=True, env=dict(env, OMP_NUM_THREADS=str(threads)))
    if out.returncode != 0:
        raise SystemExit(f"{' '.join(cmd)} failed:\n{out.stdout[-2000:]}\n{out.stderr[-2000:]}")
    s = float(re.search(r"\(([0-9.]+) s/step\)", out.stdout).group(1))
    m = re.search(r"per rank and step ([0-9.]+) s of gathers, ([0-9.]+) s of them waited for: ([0-9.]+)% hidden", out.stdout)
    return s, (float(m.group(1)), float(m.group(2)), float(m.group(3))) if m else None


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
