#!/usr/bin/env python3
"""budget=SIZE's fast solver against its local search (`:search=SECONDS`), plan by plan.

For each CONFIG@BUDGET (BUDGET as `--memory budget=` takes it: 0.5x, 900MB, bytes) plans
`mnemo plan CONFIG --memory budget=BUDGET --json --placement-seconds 0` and the same with
`:search=SECONDS`, and prints a Markdown table: the recompute cost (and GFLOP) of each, the
search's moves tried and taken, whether it ended at a local optimum, its seconds, the whole
planning time, the reduction, and the proven bound's gap before and after. Nothing runs a step.
With `--bound B`, both plans get B seconds for their bound (`:bound=B`: the LP's cutting rounds
and the root's cuts, docs/MEMORY.md "The programme").

    python3 tools/search_table.py [--mnemo build/mnemo] [--seconds 10] [--bound B] CONFIG@BUDGET ...
"""
import argparse
import json
import subprocess
import sys


def plan(mnemo, config, mode):
    cmd = [mnemo, "plan", config, "--memory", mode, "--json", "--placement-seconds", "0"]
    p = subprocess.run(cmd, capture_output=True, text=True)
    if p.returncode != 0:
        sys.exit(f"{' '.join(cmd)} failed ({p.returncode}):\n{p.stderr[-2000:]}")
    return json.loads(p.stdout)["modes"][0]


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--mnemo", default="build/mnemo")
    ap.add_argument("--seconds", type=float, default=10, help="the search's time limit (:search=SECONDS)")
    ap.add_argument("--bound", type=float, default=None, help="the bound's time for both plans (:bound=B)")
    ap.add_argument("plans", nargs="+", metavar="CONFIG@BUDGET")
    a = ap.parse_args()
    print("| config | budget | fast: cost G (GFLOP), gap, s | search: cost G (GFLOP), gap | moves (taken) | ended | search s | planning s | cost -% |")
    print("|---|---|---|---|---|---|---:|---:|---:|")
    for item in a.plans:
        if "@" not in item:
            sys.exit(f"'{item}': expected CONFIG@BUDGET, e.g. configs/resnet56-cifar.yaml@0.5x")
        config, budget = item.rsplit("@", 1)
        bound = "" if a.bound is None else f":bound={a.bound:g}"
        f = plan(a.mnemo, config, f"budget={budget}{bound}")
        s = plan(a.mnemo, config, f"budget={budget}:search={a.seconds:g}{bound}")
        ls = s.get("local_search")
        if ls is None:
            sys.exit(f"{item}: the plan has no local_search report")
        fc, sc = f["recompute_cost"], s["recompute_cost"]

        def gap(m):
            c = m["recompute_cost"]
            return 100 * (c - m["lower_bound_cost"]) / c if c > 0 else 0.0

        name = config.rsplit("/", 1)[-1]
        print(f"| {name} | {budget} | {fc / 1e9:.4g} ({f['recompute_flops'] / 1e9:.4g}), {gap(f):.1f}%, {f['planning_seconds']:.2f} | "
              f"{sc / 1e9:.4g} ({s['recompute_flops'] / 1e9:.4g}), {gap(s):.1f}% | {ls['moves']} ({ls['taken']}) | "
              f"{'local optimum' if ls['local_optimum'] else 'time limit'} | {ls['seconds']:.2f} | {s['planning_seconds']:.2f} | "
              f"{100 * (fc - sc) / fc if fc > 0 else 0.0:.1f} |", flush=True)


if __name__ == "__main__":
    main()
