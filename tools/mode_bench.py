#!/usr/bin/env python3
"""Step time of several memory modes of one config, in alternating rounds.

    tools/mode_bench.py CONFIG --modes share,optimal [--rounds R] [--steps N] [--warmup K]
                        [--batch B] [--threads T] [--mnemo build/mnemo]

Each round runs `mnemo bench CONFIG --memory MODE --json` once per mode; the order of the modes
rotates every round, so a drift in machine speed hits every mode alike. Prints every round's
median step time per mode and its ratio to the first mode, then the median over rounds of those
ratios (the summary docs/BENCHMARKS.md records). Builds nothing.
"""
import argparse
import os
import statistics
import sys

import mnemo_run


def main():
    here = os.path.dirname(os.path.abspath(__file__))
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("config")
    p.add_argument("--modes", default="share,optimal")
    p.add_argument("--rounds", type=int, default=6)
    p.add_argument("--steps", type=int, default=10)
    p.add_argument("--warmup", type=int, default=2)
    p.add_argument("--batch", type=int, default=0)
    p.add_argument("--threads", type=int, default=2)
    p.add_argument("--mnemo", default=os.path.join(os.path.dirname(here), "build", "mnemo"))
    args = p.parse_args()
    modes = [m for m in args.modes.split(",") if m]
    if len(modes) < 2 or args.rounds < 1:
        sys.exit("mode_bench: give at least two modes and one round")
    times = {m: [] for m in modes}
    info = {}
    for r in range(args.rounds):
        order = modes[r % len(modes):] + modes[:r % len(modes)]
        for m in order:
            j = mnemo_run.bench(args.mnemo, args.config, "mode_bench", m, args.steps, args.warmup, args.threads, args.batch)
            times[m].append(j["step_seconds_median"])
            info[m] = j
        base = times[modes[0]][-1]
        print(f"round {r + 1}: " + ", ".join(f"{m} {times[m][-1]:.4f} s ({times[m][-1] / base:.3f}x)" for m in modes),
              flush=True)
    print()
    print("| mode | median s/step | median ratio to " + modes[0] + " | rounds (s/step) | recompute | total planned |")
    print("|---|---:|---:|---|---:|---:|")
    for m in modes:
        ratios = [t / b for t, b in zip(times[m], times[modes[0]])]
        rec = info[m].get("recompute_overhead")
        total = info[m].get("total_bytes")
        print(f"| {m} | {statistics.median(times[m]):.4f} | {statistics.median(ratios):.3f} | "
              + ", ".join(f"{t:.4f}" for t in times[m])
              + f" | {'-' if rec is None else f'{rec:.1%}'} | {'-' if total is None else f'{total / 2**20:.1f} MiB'} |")


if __name__ == "__main__":
    main()
