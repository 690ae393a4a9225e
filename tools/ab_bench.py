#!/usr/bin/env python3
"""Step time of two mnemo binaries on one config, in alternating rounds (A, B, A, B, ...).

    tools/ab_bench.py OLD NEW CONFIG [--rounds R] [--steps N] [--warmup K] [--memory MODE] [--threads T]

Each round runs `OLD bench CONFIG --json` then `NEW bench ...` (the order swaps every round, so a
trend in machine speed hits both), and prints every round's median step times and their ratio
NEW/OLD; the summary is the median of the per-round ratios. Used for "no slower than before"
targets (docs/BENCHMARKS.md). Builds nothing.
"""
import argparse
import json
import os
import statistics
import subprocess
import sys


def bench(binary, args):
    cmd = [binary, "bench", args.config, "--json", "--steps", str(args.steps), "--warmup", str(args.warmup)]
    if args.memory:
        cmd += ["--memory", args.memory]
    env = dict(os.environ, OMP_NUM_THREADS=str(args.threads))
    out = subprocess.run(cmd, capture_output=True, text=True, env=env)
    if out.returncode != 0:
        sys.exit(f"ab_bench: {' '.join(cmd)} failed ({out.returncode}):\n{out.stderr}")
    return json.loads(out.stdout.strip().splitlines()[-1])


def main():
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("old")
    p.add_argument("new")
    p.add_argument("config")
    p.add_argument("--rounds", type=int, default=6)
    p.add_argument("--steps", type=int, default=10)
    p.add_argument("--warmup", type=int, default=2)
    p.add_argument("--memory", default="")
    p.add_argument("--threads", type=int, default=2)
    args = p.parse_args()
    if args.rounds < 1 or args.steps < 1:
        sys.exit("ab_bench: --rounds and --steps must be >= 1")
    ratios = []
    print(f"{args.config}, {args.threads} threads, {args.steps} steps per run, median step time per run")
    print("| round | order | old s/step | new s/step | new/old |")
    print("|---|---|---|---|---|")
    for r in range(args.rounds):
        order = ["old", "new"] if r % 2 == 0 else ["new", "old"]
        t = {}
        for which in order:
            t[which] = bench(args.old if which == "old" else args.new, args)["step_seconds_median"]
        ratios.append(t["new"] / t["old"])
        print(f"| {r + 1} | {' then '.join(order)} | {t['old']:.4f} | {t['new']:.4f} | {ratios[-1]:.3f} |")
    print(f"\nmedian new/old over {args.rounds} rounds: {statistics.median(ratios):.3f} "
          f"(min {min(ratios):.3f}, max {max(ratios):.3f})")


if __name__ == "__main__":
    main()
