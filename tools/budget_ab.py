#!/usr/bin/env python3
"""budget=SIZE plans of two mnemo binaries side by side: recompute FLOPs and cost, exact total and planning
time per config and budget (one run each; for times, use tools/ab_bench.py --plan).

    tools/budget_ab.py OLD NEW [CONFIG=B1,B2,... ...] [--placement-seconds 0]

Without CONFIG=... arguments it plans the set of docs/BENCHMARKS.md "Fills repaired at their
peak" (ResNet-56, ResNet-152, DenseNet-121, Inception-v3, both LSTMs). Prints a markdown table;
a budget below the least feasible total prints `infeasible`; any other failure stops it. Run from the repository root.
Builds nothing.
"""
import argparse
import json
import os
import subprocess
import sys

DEFAULT = ["configs/resnet56-cifar.yaml=0.3x,0.4x,0.5x,0.6x,62662740",
           "configs/table2/resnet152.yaml=0.3x,0.4x,0.5x,0.6x",
           "configs/table2/densenet121.yaml=0.3x,0.4x,0.5x",
           "configs/table2/inception_v3.yaml=0.4x,0.6x",
           "configs/bench-lstm-2x512-ops-head.yaml=0.45x,0.5x,0.6x,0.7x",
           "configs/bench-lstm-2x512.yaml=0.6x,0.7x,0.8x",
           "configs/lstm-paper.yaml=0.5x,0.6x,0.7x,0.8x"]


def plan(exe, cfg, budget, seconds):
    """(recompute GFLOP, total bytes, planning seconds), or None when no plan fits the budget; any
    other failure (a bad config, a crash) stops the comparison with mnemo's message."""
    cmd = [exe, "plan", cfg, "--memory", "budget=" + budget, "--placement-seconds", str(seconds), "--json"]
    p = subprocess.run(cmd, capture_output=True, text=True)
    if p.returncode:
        if "no plan fits" in p.stderr:
            return None
        sys.exit(f"budget_ab: {' '.join(cmd)} failed ({p.returncode}):\n{p.stderr}")
    d = json.loads(p.stdout)["modes"][0]
    cost = d.get("recompute_cost")  # (binaries before the roofline cost have none)
    return d["recompute_flops"] / 1e9, d["total_bytes"], d["planning_seconds"], None if cost is None else cost / 1e9


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("old")
    ap.add_argument("new")
    ap.add_argument("runs", nargs="*", default=DEFAULT, help="CONFIG=B1,B2,... (budgets as budget=SIZE takes them)")
    ap.add_argument("--placement-seconds", type=float, default=0)
    a = ap.parse_args()
    for exe in (a.old, a.new):
        if not (os.path.isfile(exe) and os.access(exe, os.X_OK)):
            ap.error(f"'{exe}' is not an executable mnemo binary")
    print("| config | budget | old GFLOP | new GFLOP | old cost G | new cost G | old total | new total | old s | new s |")
    print("|---|---|---:|---:|---:|---:|---:|---:|---:|---:|")
    for run in a.runs:
        cfg, _, budgets = run.rpartition("=")
        if not cfg:
            ap.error(f"'{run}': expected CONFIG=B1,B2,...")
        for b in budgets.split(","):
            old, new = plan(a.old, cfg, b, a.placement_seconds), plan(a.new, cfg, b, a.placement_seconds)
            name = cfg.split("/")[-1]
            if old is None or new is None:
                print(f"| {name} | {b} | {'infeasible' if old is None else 'ok'} (old) | {'infeasible' if new is None else 'ok'} (new) | | | | | | |",
                      flush=True)
                continue
            cost = ["-" if x[3] is None else f"{x[3]:.3f}" for x in (old, new)]
            print(f"| {name} | {b} | {old[0]:.3f} | {new[0]:.3f} | {cost[0]} | {cost[1]} | {old[1]} | {new[1]} | {old[2]:.2f} | {new[2]:.2f} |", flush=True)


if __name__ == "__main__":
    main()
