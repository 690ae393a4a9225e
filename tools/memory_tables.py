#!/usr/bin/env python3
"""Markdown tables of `mnemo plan --json` for the reference configs (docs/BENCHMARKS.md).

    python3 tools/memory_tables.py [--mnemo build/mnemo] [--memory all] configs/*.yaml

Uses only the standard library. Prints one table per config: every memory mode with
feature_map_bytes, workspace, total, max_live, fragmentation, recompute overhead and planning time,
plus the ratio of each mode's feature maps to `none` and to `share`.
"""
import argparse
import json
import subprocess
import sys


def fmt(b):
    for unit, size in (("GiB", 2**30), ("MiB", 2**20), ("KiB", 2**10)):
        if b >= size:
            return f"{b / size:.2f} {unit}"
    return f"{b} B"


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("configs", nargs="+")
    ap.add_argument("--mnemo", default="build/mnemo")
    ap.add_argument("--memory", default="all")
    a = ap.parse_args()
    for cfg in a.configs:
        out = subprocess.run([a.mnemo, "plan", cfg, "--memory", a.memory, "--json"], capture_output=True, text=True)
        if out.returncode != 0:
            sys.exit(f"mnemo plan {cfg} failed: {out.stderr.strip()}")
        d = json.loads(out.stdout)
        modes = {m["mode"]: m for m in d["modes"]}
        none = modes.get("none", {}).get("feature_map_bytes")
        share = modes.get("share", {}).get("feature_map_bytes")
        print(f"**{cfg}** ({d['model']}, {d['layers']} layers, batch {d['batch']}, {d['forward_nodes']} forward nodes)\n")
        print("| mode | feature_map | vs none | vs share | workspace | total | max_live | fragmentation | recompute | plan s |")
        print("|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|")
        for m in d["modes"]:
            fm = m["feature_map_bytes"]
            print(f"| {m['mode']} | {fmt(fm)} | {none / fm:.1f}x | {share / fm:.2f}x | {fmt(m['workspace_bytes'])} | "
                  f"{fmt(m['total_bytes'])} | {fmt(m['max_live_bytes'])} | {100 * m['fragmentation']:.2f}% | "
                  f"{100 * m['recompute_overhead']:.1f}% | {m['planning_seconds']:.3f} |")
        print()


if __name__ == "__main__":
    main()
