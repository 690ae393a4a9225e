#!/usr/bin/env python3
"""Feng & Huang's Table 2 networks planned by mnemo: feature-map bytes per memory mode beside the
paper's "regular" and "ours" columns, and how long planning takes (docs/MODELS.md).

    python3 tools/zoo_table.py [--mnemo build/mnemo] [--configs configs/table2] [--json OUT]

Runs `mnemo plan CONFIG --memory all --json` once per config (shapes only, nothing is trained)
and prints a Markdown table: per network the paper's batch, the paper's regular-training memory
and its optimal-checkpoint memory (MB, weights excluded; PyTorch 1.5, measured), then mnemo's
planned feature-map bytes under none, share, sublinear and recursive (MiB; exact plans, weights,
gradients of weights and optimizer state excluded), and the slowest mode's planning time and the
whole command's wall time.
"""
import argparse
import json
import os
import subprocess
import sys
import time

# Feng & Huang, "Optimal Gradient Checkpoint Search for Arbitrary Computation Graphs", Table 2:
# config name -> (row label, batch, regular MB, ours MB). The NAS rows are cells in DARTS's CIFAR
# network at 32x32 (the paper's input size for them is lost in the text we have).
PAPER = {
    "alexnet": ("AlexNet", 1024, 4955, 3287),
    "vgg11": ("VGG-11", 64, 3577, 2781),
    "vgg13": ("VGG-13", 64, 5136, 3565),
    "vgg16": ("VGG-16", 64, 5136, 3565),
    "vgg19": ("VGG-19", 64, 5189, 3565),
    "resnet18": ("ResNet-18", 256, 5635, 3677),
    "resnet34": ("ResNet-34", 128, 4079, 1838),
    "resnet50": ("ResNet-50", 64, 5323, 1973),
    "resnet101": ("ResNet-101", 32, 3934, 1024),
    "resnet152": ("ResNet-152", 16, 2767, 526),
    "densenet121": ("DenseNet-121", 32, 4027, 898),
    "densenet161": ("DenseNet-161", 16, 3751, 666),
    "densenet169": ("DenseNet-169", 32, 4862, 897),
    "densenet201": ("DenseNet-201", 16, 3146, 474),
    "inception_v3": ("Inception-v3", 32, 3074, 881),
    "nasnet": ("NASNet (DARTS's CIFAR network, 32x32)", 64, 5832, 1129),
    "amoebanet": ("AmoebaNet (DARTS's CIFAR network, 32x32)", 64, 4944, 1058),
    "darts": ("DARTS (CIFAR network, 32x32)", 64, 5627, 1115),
}
# The rest of Table 2's columns: (best of 10 random checkpoint sets MB, Chen et al. MB, GCP time
# overhead); None where the paper has N/A.
PAPER_MORE = {
    "alexnet": (4408, 4408, 0.34), "vgg11": (2781, 2781, 0.34), "vgg13": (3565, 3565, 0.33),
    "vgg16": (4352, 3957, 0.32), "vgg19": (4548, 3957, 0.33), "resnet18": (4069, None, 0.30),
    "resnet34": (2231, None, 0.35), "resnet50": (2714, None, 0.31), "resnet101": (2541, None, 0.35),
    "resnet152": (1464, None, 0.37), "densenet121": (1629, None, 0.34), "densenet161": (1432, None, 0.36),
    "densenet169": (1774, None, 0.32), "densenet201": (1242, None, 0.53), "inception_v3": (1336, None, 0.29),
    "nasnet": (None, None, 0.31), "amoebanet": (None, None, 0.36), "darts": (None, None, 0.55),
}
# The Re-forwarding paper's Table 1 (PyTorch, measured as the difference of two batch sizes; its
# Inception-v3 input is 300x300, mnemo's config 299x299): regular MB, Chen et al. MB (on the
# non-linear networks "manual": the graph re-organised into a chain by hand), Re-forwarding MB,
# time overhead.
REFORWARD = {
    "alexnet": (3550, 3108, 2620, 0.40), "vgg11": (2976, 2292, 1802, 0.35), "vgg13": (4152, 2586, 2586, 0.31),
    "vgg16": (4470, 2894, 2586, 0.30), "vgg19": (4788, 2894, 2502, 0.29), "resnet18": (5402, 2898, 2898, 0.40),
    "resnet34": (3900, 1936, 1544, 0.36), "resnet50": (5206, 2332, 1798, 0.40), "resnet101": (3812, 1216, 970, 0.37),
    "resnet152": (2810, 636, 564, 0.39), "densenet121": (3984, 1012, 776, 0.42), "densenet161": (3658, 744, 616, 0.39),
    "densenet169": (4826, 998, 848, 0.43), "densenet201": (3164, 600, 582, 0.45), "inception_v3": (2976, 1026, 910, 0.35),
}
MODES = ["none", "share", "sublinear", "recursive", "optimal"]


def main():
    here = os.path.dirname(os.path.abspath(__file__))
    root = os.path.dirname(here)
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--mnemo", default=os.path.join(root, "build", "mnemo"))
    p.add_argument("--configs", default=os.path.join(root, "configs", "table2"))
    p.add_argument("--json", help="also write every plan report here")
    p.add_argument("--optimal", action="store_true",
                   help="print the optimal-mode reproduction tables (docs/REPRODUCTION.md) instead")
    a = p.parse_args()
    mib = 1 << 20
    rows, reports = [], {}
    for name, (label, batch, regular, ours) in PAPER.items():
        cfg = os.path.join(a.configs, name + ".yaml")
        if not os.path.exists(cfg):
            sys.exit(f"zoo_table: {cfg} missing")
        print(f"planning {name} ...", file=sys.stderr, flush=True)
        t0 = time.perf_counter()
        r = subprocess.run([a.mnemo, "plan", cfg, "--memory", "all", "--json"], capture_output=True, text=True)
        wall = time.perf_counter() - t0
        if r.returncode != 0:
            sys.exit(f"zoo_table: mnemo plan {cfg} failed:\n{r.stderr}")
        rep = json.loads(r.stdout)
        reports[name] = rep
        if rep["batch"] != batch:
            sys.exit(f"zoo_table: {cfg} has batch {rep['batch']}, the paper's row has {batch}")
        by = {m["mode"]: m for m in rep["modes"]}
        fm = [by[m]["feature_map_bytes"] / mib for m in MODES]
        slowest = max(m["planning_seconds"] for m in rep["modes"])
        rows.append((label, batch, regular, ours, fm, slowest, wall))
    if a.optimal:
        optimal_tables(reports)
        return
    print("| network | batch | paper regular (MB) | paper optimal (MB) | mnemo none | mnemo share | share / regular "
          "| mnemo sublinear | mnemo recursive | mnemo optimal | slowest mode's plan | `plan --memory all` wall |")
    print("|---|---|---|---|---|---|---|---|---|---|---|---|")
    for label, batch, regular, ours, fm, slowest, wall in rows:
        print(f"| {label} | {batch} | {regular} | {ours} | {fm[0]:.0f} | {fm[1]:.0f} | {fm[1] / regular:.2f} | "
              f"{fm[2]:.0f} | {fm[3]:.0f} | {fm[4]:.0f} | {slowest:.2f} s | {wall:.2f} s |")
    ref_path = os.path.join(root, "tests", "fixtures", "zoo_reference.json")
    ref = json.load(open(ref_path))["models"] if os.path.exists(ref_path) else {}
    print()
    print(f"Sizes beside torchvision's ({os.path.relpath(ref_path, root)}, made by tools/zoo_reference.py): trainable "
          "parameters, and GFLOPs of one image's forward convolutions and matrix products.")
    print()
    print("| network | mnemo params | torchvision params | mnemo GFLOPs | torchvision GFLOPs | ratio |")
    print("|---|---|---|---|---|---|")
    for name, (label, *_rest) in PAPER.items():
        rep = reports[name]
        tv = ref.get(name)
        flops = rep["forward_matmul_flops"] / rep["batch"] / 1e9
        if tv:
            tvf = tv["forward_flops"] / 1e9
            print(f"| {label} | {rep['params']:,} | {tv['params']:,} | {flops:.3f} | {tvf:.3f} | {flops / tvf:.4f} |")
        else:
            print(f"| {label} | {rep['params']:,} | - | {flops:.3f} | - | - |")
    if a.json:
        with open(a.json, "w") as f:
            json.dump(reports, f, indent=1)


def optimal_tables(reports):
    """Feng & Huang's Table 2 and the Re-forwarding paper's Table 1 beside mnemo's share,
    sublinear and optimal feature maps, optimal's recompute overhead and planning time."""
    mib = 1 << 20

    def modes(name):
        return {m["mode"]: m for m in reports[name]["modes"]}

    def na(v, fmt="{}"):
        return "N/A" if v is None else fmt.format(v)

    print("| network | batch | regular | random | Chen | ours | time overhead | mnemo share | mnemo sublinear "
          "| mnemo optimal | optimal <= ours | optimal recompute | papers' objective (optimum) | optimal plan s |")
    print("|---|---|---|---|---|---|---|---|---|---|---|---|---|---|")
    met = 0
    for name, (label, batch, regular, ours) in PAPER.items():
        rnd, chen, over = PAPER_MORE[name]
        by = modes(name)
        o = by["optimal"]
        opt = o["feature_map_bytes"] / mib
        met += opt <= ours
        print(f"| {label} | {batch} | {regular} | {na(rnd)} | {na(chen)} | {ours} | {over:.0%} | "
              f"{by['share']['feature_map_bytes'] / mib:.0f} | {by['sublinear']['feature_map_bytes'] / mib:.0f} | {opt:.0f} | "
              f"{'yes' if opt <= ours else 'no'} | {o['recompute_overhead']:.0%} | {o['model_optimum_bytes'] / mib:.0f} | "
              f"{o['planning_seconds']:.3f} |")
    print()
    print(f"optimal at or below the paper's \"ours\" on {met} of {len(PAPER)} rows")
    print()
    print("| network | batch | regular | Chen (manual) | Re-forwarding | time overhead | mnemo share | mnemo sublinear "
          "| mnemo optimal | optimal <= Re-forwarding | optimal recompute | optimal plan s |")
    print("|---|---|---|---|---|---|---|---|---|---|---|---|")
    met = 0
    for name, (regular, chen, ours, over) in REFORWARD.items():
        label, batch = PAPER[name][0], PAPER[name][1]
        by = modes(name)
        o = by["optimal"]
        opt = o["feature_map_bytes"] / mib
        met += opt <= ours
        print(f"| {label} | {batch} | {regular} | {chen} | {ours} | {over:.0%} | {by['share']['feature_map_bytes'] / mib:.0f} | "
              f"{by['sublinear']['feature_map_bytes'] / mib:.0f} | {opt:.0f} | {'yes' if opt <= ours else 'no'} | "
              f"{o['recompute_overhead']:.0%} | {o['planning_seconds']:.3f} |")
    print()
    print(f"optimal at or below Re-forwarding on {met} of {len(REFORWARD)} rows")


if __name__ == "__main__":
    main()
