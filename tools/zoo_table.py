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
MODES = ["none", "share", "sublinear", "recursive"]


def main():
    here = os.path.dirname(os.path.abspath(__file__))
    root = os.path.dirname(here)
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--mnemo", default=os.path.join(root, "build", "mnemo"))
    p.add_argument("--configs", default=os.path.join(root, "configs", "table2"))
    p.add_argument("--json", help="also write every plan report here")
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
    print("| network | batch | paper regular (MB) | paper optimal (MB) | mnemo none | mnemo share | share / regular "
          "| mnemo sublinear | mnemo recursive | slowest mode's plan | `plan --memory all` wall |")
    print("|---|---|---|---|---|---|---|---|---|---|---|")
    for label, batch, regular, ours, fm, slowest, wall in rows:
        print(f"| {label} | {batch} | {regular} | {ours} | {fm[0]:.0f} | {fm[1]:.0f} | {fm[1] / regular:.2f} | "
              f"{fm[2]:.0f} | {fm[3]:.0f} | {slowest:.2f} s | {wall:.2f} s |")
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


if __name__ == "__main__":
    main()
