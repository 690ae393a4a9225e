#!/usr/bin/env python3
"""Step time of several memory modes of one or more configs, in alternating rounds.

    tools/mode_bench.py CONFIG [CONFIG2 ...] --modes share,optimal [--rounds R] [--steps N]
                        [--warmup K] [--batch B] [--threads T] [--mnemo build/mnemo]

The variants are every mode of every config (configs outer: with two configs and one mode, two
variants, e.g. the fine-grained and the fused LSTM). Each round runs `mnemo bench CONFIG --memory
MODE --json` once per variant; the order of the variants rotates every round, so a drift in
machine speed hits every variant alike. Prints every round's median step time per variant and its
ratio to the first variant, then the median over rounds of those ratios (the summary
docs/BENCHMARKS.md records). Builds nothing.
"""
import argparse
import os
import statistics
import sys

import mnemo_run


def main():
    here = os.path.dirname(os.path.abspath(__file__))
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("config", nargs="+")
    p.add_argument("--modes", default="share,optimal")
    p.add_argument("--rounds", type=int, default=6)
    p.add_argument("--steps", type=int, default=10)
    p.add_argument("--warmup", type=int, default=2)
    p.add_argument("--batch", type=int, default=0)
    p.add_argument("--threads", type=int, default=2)
    p.add_argument("--mnemo", default=os.path.join(os.path.dirname(here), "build", "mnemo"))
    args = p.parse_args()
    modes = [m for m in args.modes.split(",") if m]
    variants = [(c, m) for c in args.config for m in modes]
    if len(variants) < 2 or args.rounds < 1:
        sys.exit("mode_bench: give at least two modes (or two configs) and one round")
    label = {v: v[1] if len(args.config) == 1 else f"{os.path.basename(v[0])} {v[1]}" for v in variants}
    times = {v: [] for v in variants}
    info = {}
    for r in range(args.rounds):
        order = variants[r % len(variants):] + variants[:r % len(variants)]
        for v in order:
            j = mnemo_run.bench(args.mnemo, v[0], "mode_bench", v[1], args.steps, args.warmup, args.threads, args.batch)
            times[v].append(j["step_seconds_median"])
            info[v] = j
        base = times[variants[0]][-1]
        print(f"round {r + 1}: " + ", ".join(f"{label[v]} {times[v][-1]:.4f} s ({times[v][-1] / base:.3f}x)" for v in variants),
              flush=True)
    print()
    print("| variant | median s/step | median ratio to " + label[variants[0]] + " | rounds (s/step) | recompute | total planned |")
    print("|---|---:|---:|---|---:|---:|")
    for v in variants:
        ratios = [t / b for t, b in zip(times[v], times[variants[0]])]
        rec = info[v].get("recompute_overhead")
        total = info[v].get("total_bytes")
        print(f"| {label[v]} | {statistics.median(times[v]):.4f} | {statistics.median(ratios):.3f} | "
              + ", ".join(f"{t:.4f}" for t in times[v])
              + f" | {'-' if rec is None else f'{rec:.1%}'} | {'-' if total is None else f'{total / 2**20:.1f} MiB'} |")


if __name__ == "__main__":
    main()
