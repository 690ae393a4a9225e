#!/usr/bin/env python3
"""Measured step time along the budget=SIZE trade-off of one config, beside other memory modes,
in alternating rounds.

    tools/budget_bench.py CONFIG [--points 8] [--modes share,sublinear,optimal] [--rounds 3]
                          [--steps 10] [--warmup 2] [--threads 2] [--device cpu|cuda] [--at sublinear,...]
                          [--balance 0,10] [--mnemo build/mnemo]

Plans `budget=SIZE` at --points budgets from share's total down to the least feasible one
(`mnemo plan --memory budget=... --json`), keeps the distinct plans (same total and recompute
FLOPs: the same member of the family), then times each of them and each --modes mode with
`mnemo bench --json` once per round, the order rotating every round. Prints per plan: the budget,
exact total, recompute share of the step's FLOPs and of its roofline cost (the objective, at the balance it
was planned with), the median over rounds of its step time and of
its ratio to the first mode's step time in the same round, and every round's step time.
--device plans and runs every plan on that device (`mnemo --device`; default: the config's).
--at adds a budget at each named mode's exact total (e.g. `--at sublinear`: the least recompute
that fits in sublinear's memory, issue 13's step-time target), beside the evenly spaced ones.
--balance plans every budget at each of these cost-model balances (`budget=SIZE:balance=B`, FLOPs
per byte; 0: FLOPs alone) instead of the default one: which objective gives the faster steps.
"""
import argparse
import functools
import os
import statistics
import sys

import mnemo_run


def main():
    here = os.path.dirname(os.path.abspath(__file__))
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("config")
    p.add_argument("--points", type=int, default=8)
    p.add_argument("--modes", default="share,sublinear,optimal")
    p.add_argument("--rounds", type=int, default=3)
    p.add_argument("--steps", type=int, default=10)
    p.add_argument("--warmup", type=int, default=2)
    p.add_argument("--threads", type=int, default=2)
    p.add_argument("--device", default="", help="cpu, cuda or cuda:N (default: the config's)")
    p.add_argument("--at", default="", help="comma-separated modes: also a budget at each one's exact total")
    p.add_argument("--balance", default="", help="comma-separated balances (FLOPs per byte) to plan each budget at")
    p.add_argument("--mnemo", default=os.path.join(os.path.dirname(here), "build", "mnemo"))
    a = p.parse_args()
    if a.points < 2 or a.rounds < 1:
        sys.exit("budget_bench: --points >= 2 and --rounds >= 1")
    modes = [m for m in a.modes.split(",") if m]
    if not modes:
        sys.exit("budget_bench: give at least one --modes mode (the first is the reference)")

    @functools.lru_cache(maxsize=None)  # (--at and --modes may name one mode: planned once)
    def plan(mode):
        return mnemo_run.plan(a.mnemo, a.config, mode, "budget_bench", a.threads, a.device)

    top = plan("budget=1x")
    share_total = plan("share")["total_bytes"]
    least = top["least_feasible_bytes"]
    plans = {}  # (total, recompute) -> (mode string, budget, report)
    budgets = [share_total - (share_total - least) * k // (a.points - 1) for k in range(a.points)]
    for m in (m for m in a.at.split(",") if m):
        t = plan(m)["total_bytes"]
        if t < least:
            sys.exit(f"budget_bench: --at {m}: its total {t} B is below the least feasible budget {least} B")
        budgets.append(t)
    balances = [f":balance={x}" for x in a.balance.split(",") if x] or [""]
    for b in sorted(set(budgets), reverse=True):
        for bal in balances:
            r = plan(f"budget={b}{bal}")
            key = (r["total_bytes"], r["recompute_flops"])
            if key not in plans:
                plans[key] = (f"budget={b}{bal}", b, r)
            print(f"budget{bal} {b / 2**20:.1f} MiB: total {r['total_bytes'] / 2**20:.1f} MiB, recompute {r['recompute_overhead']:.1%} "
                  f"(cost {r['recompute_cost_overhead']:.1%})", flush=True)
    runs = modes + [m for m, _, _ in plans.values()]
    info = {m: plan(m) for m in modes}
    info.update({m: r for m, _, r in plans.values()})
    times = {m: [] for m in runs}
    for rnd in range(a.rounds):
        order = runs[rnd % len(runs):] + runs[:rnd % len(runs)]
        for m in order:
            j = mnemo_run.bench(a.mnemo, a.config, "budget_bench", m, a.steps, a.warmup, a.threads, device=a.device)
            times[m].append(j["step_seconds_median"])
        print(f"round {rnd + 1}: " + ", ".join(f"{m} {times[m][-1]:.4f}" for m in runs), flush=True)
    ref = modes[0]
    print()
    print(f"| plan | total | recompute FLOPs | recompute cost | median s/step | median ratio to {ref} | rounds (s/step) |")
    print("|---|---:|---:|---:|---:|---:|---|")
    for m in runs:
        r = info[m]
        ratios = [t / b for t, b in zip(times[m], times[ref])]
        print(f"| {m} | {r['total_bytes'] / 2**20:.1f} MiB | {r['recompute_overhead']:.1%} | {r['recompute_cost_overhead']:.1%} | "
              f"{statistics.median(times[m]):.4f} | "
              f"{statistics.median(ratios):.3f} | " + ", ".join(f"{t:.4f}" for t in times[m]) + " |")


if __name__ == "__main__":
    main()
