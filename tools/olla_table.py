#!/usr/bin/env python3
# OLLA's Figures 7, 8 and 13 on mnemo's plans (docs/REPRODUCTION.md "OLLA"): per zoo CNN and batch
# size, in `share` allocation (no recomputation), shapes only:
#   Fig. 7   the peak of live bytes in PyTorch's order (updates-last) and in mnemo's (greedy over
#            the default, which applies each update right after its gradient), and the bound no
#            order goes below (the forward pass's own peak)
#   Fig. 8   the arena of best fit against the exact placement, as fragmentation over the live bytes
#   Fig. 13  the arena of PyTorch's order with best fit against mnemo's order with the exact placement
# and the time the order pass and the placement took.
#   python3 tools/olla_table.py [--batches 1,32] [--models alexnet,vgg16,...]
#   (run from the repository root, after scripts/build.sh)
import argparse, json, os, subprocess, tempfile

from zoo_models import MODELS, write_config


ap = argparse.ArgumentParser()
ap.add_argument("--batches", default="1,32")
ap.add_argument("--models", default=",".join(MODELS))
a = ap.parse_args()


def plan(cfg, order, seconds):
    cmd = ["./build/mnemo", "plan", cfg, "--memory", "share", "--order", order, "--json", "--placement-seconds", str(seconds)]
    return json.loads(subprocess.run(cmd, capture_output=True, text=True, check=True).stdout)["modes"][0]


M = 2**20
print("| model | batch | peak, PyTorch's order | peak, mnemo's order | no order below | Fig. 7 | best fit | exact | Fig. 8 fragmentation | Fig. 13 | order s | placement s |")
print("|---|---:|---:|---:|---:|---:|---:|---:|---|---:|---:|---:|")
with tempfile.TemporaryDirectory() as tmp:
    for name in a.models.split(","):
        for batch in a.batches.split(","):
            cfg = os.path.join(tmp, f"{name}-b{batch}.yaml")
            write_config(cfg, name, batch)
            torch_fit = plan(cfg, "updates-last", 0)
            mine_fit = plan(cfg, "greedy", 0)
            mine = plan(cfg, "greedy", 5)
            p0, p1 = torch_fit["max_live_bytes"], mine["max_live_bytes"]
            f0, f1 = mine_fit["arena_bytes"], mine["arena_bytes"]
            a0 = torch_fit["arena_bytes"]
            print(f"| {name} | {batch} | {p0/M:.1f} MiB | {p1/M:.1f} MiB | {mine['order']['bound_bytes']/M:.1f} MiB | {100*(p1-p0)/p0:+.1f}% | {f0/M:.1f} MiB | {f1/M:.1f} MiB | "
                  f"{100*mine_fit['fragmentation']:.2f}% -> {100*mine['fragmentation']:.2f}% ({mine['placement']}) | {100*(f1-a0)/a0:+.1f}% | "
                  f"{mine['order']['seconds']:.2f} | {mine['placement_seconds']:.2f} |", flush=True)
