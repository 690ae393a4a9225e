#!/usr/bin/env python3
"""Step time of two mnemo binaries on one config, in alternating rounds (A, B, A, B, ...).

    tools/ab_bench.py OLD NEW CONFIG [--rounds R] [--steps N] [--warmup K] [--memory MODE] [--threads T]

Each round runs `OLD bench CONFIG --json` then `NEW bench ...` (the order swaps every round, so a
trend in machine speed hits both), and prints every round's median step times and their ratio
NEW/OLD; the summary is the median of the per-round ratios. Used for "no slower than before"
targets (docs/BENCHMARKS.md). Builds nothing.
"""
import argparse
import statistics
import sys

import mnemo_run


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
            t[which] = mnemo_run.bench(args.old if which == "old" else args.new, args.config, "ab_bench", args.memory, args.steps, args.warmup,
                                       args.threads)["step_seconds_median"]
        ratios.append(t["new"] / t["old"])
        print(f"| {r + 1} | {' then '.join(order)} | {t['old']:.4f} | {t['new']:.4f} | {ratios[-1]:.3f} |")
    print(f"\nmedian new/old over {args.rounds} rounds: {statistics.median(ratios):.3f} "
          f"(min {min(ratios):.3f}, max {max(ratios):.3f})")


if __name__ == "__main__":
    main()
