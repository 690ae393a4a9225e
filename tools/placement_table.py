#!/usr/bin/env python3
# The placement table of docs/REPRODUCTION.md "Exact placement": per config and mode, the arena of
# best fit alone (--placement-seconds 0) and of the exact placement (the config's time limit, 5 s
# unless it sets placement_seconds), their fragmentation against the live-bytes bound, the proven
# least arena, what the placement reached and its time.
#   python3 tools/placement_table.py [--modes share,sublinear,optimal] [--order ORDER] [--mnemo BINARY] CONFIG...
#   (run from the repository root, after scripts/build.sh)
import argparse, json, subprocess

ap = argparse.ArgumentParser()
ap.add_argument("configs", nargs="+")
ap.add_argument("--modes", default="share,sublinear,optimal")
ap.add_argument("--order", default="default")
ap.add_argument("--mnemo", default="./build/mnemo")
a = ap.parse_args()


def plan(cfg, mode, seconds):
    cmd = [a.mnemo, "plan", cfg, "--memory", mode, "--order", a.order, "--json"]
    if seconds is not None:
        cmd += ["--placement-seconds", str(seconds)]
    return json.loads(subprocess.run(cmd, capture_output=True, text=True, check=True).stdout)["modes"][0]


M = 2**20
print("| config | mode | live bytes | best fit | fragmentation | exact placement | fragmentation | proven least arena | placement | seconds |")
print("|---|---|---:|---:|---:|---:|---:|---:|---|---:|")
for cfg in a.configs:
    for mode in a.modes.split(","):
        fit, ex = plan(cfg, mode, 0), plan(cfg, mode, None)
        name = cfg.split("/")[-1].removesuffix(".yaml")
        print(f"| {name} | {mode} | {ex['max_live_bytes']/M:.1f} MiB | {fit['arena_bytes']/M:.1f} MiB | {100*fit['fragmentation']:.2f}% | "
              f"{ex['arena_bytes']/M:.1f} MiB | {100*ex['fragmentation']:.2f}% | {ex['arena_bound_bytes']/M:.1f} MiB | {ex['placement']} | "
              f"{ex['placement_seconds']:.2f} |", flush=True)
