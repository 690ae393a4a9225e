#!/usr/bin/env python3
"""`optimal` against `share`, `drop-bn-relu` and `sublinear` on every shipped config: the exact
arena of each, and whether `optimal` is ever worse (docs/BENCHMARKS.md).

    python3 tools/optimal_check.py [--mnemo build/mnemo]

Plans every `configs/*.yaml` and `configs/table2/*.yaml` with `mnemo plan CONFIG --memory all
--json` (shapes only) and prints one line per config; exits 1 if `optimal`'s arena is above any
of the three on some config.
"""
import argparse
import glob
import json
import os
import subprocess
import sys


def main():
    root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--mnemo", default=os.path.join(root, "build", "mnemo"))
    a = p.parse_args()
    cfgs = sorted(glob.glob(os.path.join(root, "configs", "*.yaml"))) + sorted(glob.glob(os.path.join(root, "configs", "table2", "*.yaml")))
    worse, mib = 0, 1 << 20
    for c in cfgs:
        r = subprocess.run([a.mnemo, "plan", c, "--memory", "all", "--json"], capture_output=True, text=True)
        if r.returncode != 0:
            sys.exit(f"optimal_check: mnemo plan {c} failed:\n{r.stderr}")
        by = {m["mode"]: m for m in json.loads(r.stdout)["modes"]}
        o = by["optimal"]
        won = next(s["origin"] for s in o["search"] if s["chosen"])
        bad = [k for k in ("share", "drop-bn-relu", "sublinear") if o["arena_bytes"] > by[k]["arena_bytes"]]
        worse += bool(bad)
        print(f"{os.path.relpath(c, root)}: arena MiB optimal {o['arena_bytes'] / mib:.1f} (won by a {won} candidate), "
              f"sublinear {by['sublinear']['arena_bytes'] / mib:.1f}, drop-bn-relu {by['drop-bn-relu']['arena_bytes'] / mib:.1f}, "
              f"share {by['share']['arena_bytes'] / mib:.1f}" + (f"  WORSE than {', '.join(bad)}" if bad else ""), flush=True)
    print(f"{len(cfgs)} configs, optimal worse on {worse}")
    sys.exit(1 if worse else 0)


if __name__ == "__main__":
    main()
