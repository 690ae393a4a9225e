#!/usr/bin/env python3
"""Step time (or planning time) of two mnemo binaries on one config, in alternating rounds (A, B, A, B, ...).

    tools/ab_bench.py OLD NEW CONFIG [--rounds R] [--steps N] [--warmup K] [--memory MODE] [--threads T]
    tools/ab_bench.py OLD NEW CONFIG --plan --memory MODE [--rounds R] [--threads T]

With --plan the time compared is the planning time of `mnemo plan CONFIG --memory MODE --json`
(its `planning_seconds`: the mirror plan and the memory plan with its exact placement, on
OMP_NUM_THREADS=T threads), and each run's placement status and fragmentation are printed beside
it, with whether both chose the same plan (equal recompute FLOPs and live bytes); --steps and
--warmup do not apply.

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
    p.add_argument("--plan", action="store_true", help="compare planning times (mnemo plan) instead of step times")
    args = p.parse_args()
    if args.rounds < 1 or args.steps < 1:
        sys.exit("ab_bench: --rounds and --steps must be >= 1")
    if args.plan and not args.memory:
        sys.exit("ab_bench: --plan needs --memory MODE")
    binary = {"old": args.old, "new": args.new}
    if args.plan:
        print(f"{args.config}, --memory {args.memory}: planning seconds per run")
        print("| round | order | old s | new s | new/old | old placement | new placement | same plan |")
        print("|---|---|---|---|---|---|---|---|")
    else:
        print(f"{args.config}, {args.threads} threads, {args.steps} steps per run, median step time per run")
        print("| round | order | old s/step | new s/step | new/old |")
        print("|---|---|---|---|---|")
    ratios = []
    for r in range(args.rounds):
        order = ["old", "new"] if r % 2 == 0 else ["new", "old"]
        rep, t = {}, {}
        for which in order:
            if args.plan:
                rep[which] = mnemo_run.plan(binary[which], args.config, args.memory, "ab_bench", args.threads)
                t[which] = rep[which]["planning_seconds"]
            else:
                t[which] = mnemo_run.bench(binary[which], args.config, "ab_bench", args.memory, args.steps, args.warmup,
                                           args.threads)["step_seconds_median"]
        ratios.append(t["new"] / t["old"])
        line = f"| {r + 1} | {' then '.join(order)} | {t['old']:.4f} | {t['new']:.4f} | {ratios[-1]:.3f} |"
        if args.plan:
            def placed(m):
                return f"{m['placement']}, {100 * m['fragmentation']:.4f}%"
            same = all(rep["old"][k] == rep["new"][k] for k in ("recompute_flops", "max_live_bytes"))
            line += f" {placed(rep['old'])} | {placed(rep['new'])} | {'yes' if same else 'NO'} |"
        print(line, flush=True)
    print(f"\nmedian new/old over {args.rounds} rounds: {statistics.median(ratios):.3f} "
          f"(min {min(ratios):.3f}, max {max(ratios):.3f})")


if __name__ == "__main__":
    main()
