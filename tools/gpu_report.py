#!/usr/bin/env python3
"""Summarises the logs of scripts/gpu-run.sh as a Markdown table for docs/BENCHMARKS.md.

Reads every *.log under the output folder, takes the JSON lines in them (from `mnemo bench --json` and
tools/bench_pytorch.py), and prints one row per run: the model, who ran it, the memory mode, the median
step time, examples per second, mnemo's step time as a ratio of PyTorch's on the same model (< 1 is
faster), and memory: mnemo's measured bytes (cudaMemGetInfo peak minus the memory in use at open) and
planned total; PyTorch's max_memory_allocated and max_memory_reserved. Plain Python, no dependencies
(it runs on the GPU machine).

Usage: python3 tools/gpu_report.py OUT_DIR
"""

import json
import os
import sys

# mnemo config stem -> the PyTorch model name of the same network
SAME_MODEL = {"resnet50-imagenet": "resnet50", "lstm-paper": "lstm-paper", "resnet56-cifar": "resnet56",
              "bench-lstm-2x512": "lstm"}


def gib(b):
    return "-" if b is None else f"{b / 2**30:.2f} GiB"


def records(folder):
    for name in sorted(os.listdir(folder)):
        if not name.endswith(".log"):
            continue
        with open(os.path.join(folder, name), encoding="utf-8", errors="replace") as f:
            for line in f:
                line = line.strip()
                if not line.startswith("{"):
                    continue
                try:
                    rec = json.loads(line)
                except json.JSONDecodeError:
                    continue
                rec["_log"] = name
                yield rec


def main(argv):
    if len(argv) != 2 or not os.path.isdir(argv[1]):
        sys.exit("usage: gpu_report.py OUT_DIR   (the folder scripts/gpu-run.sh wrote)")
    rows, torch_median = [], {}
    for r in records(argv[1]):
        if r.get("framework") == "pytorch":
            model = r["model"] + (" (tf32)" if r.get("tf32") else "")
            torch_median[model] = r["step_seconds_median"]
            rows.append(dict(model=model, who="PyTorch " + str(r.get("torch", "")), mode="eager", median=r["step_seconds_median"],
                             batch=r["batch"], measured=r.get("peak_allocated_bytes"), extra=r.get("peak_reserved_bytes"),
                             planned=None, key=None))
        elif "step_seconds_median" in r and "config" in r:
            stem = os.path.splitext(os.path.basename(r["config"]))[0]
            mode = r.get("mode", "?") + ("" if r.get("captured_graphs") else " (eager)")
            rows.append(dict(model=SAME_MODEL.get(stem, stem), who="mnemo", mode=mode, median=r["step_seconds_median"],
                             batch=r["batch"], measured=r.get("device_measured_bytes"), extra=None, planned=r.get("total_bytes"),
                             key=SAME_MODEL.get(stem)))
    if not rows:
        sys.exit(f"gpu_report: no benchmark JSON lines in {argv[1]}/*.log")
    print("| model | run | mode | batch | median step | examples/s | vs PyTorch | measured memory | planned total | PyTorch reserved |")
    print("|---|---|---|---|---|---|---|---|---|---|")
    for w in sorted(rows, key=lambda w: (w["model"], w["who"] != "mnemo", w["mode"])):
        ratio = "-"
        if w["who"] == "mnemo" and w["key"] in torch_median:
            ratio = f"{w['median'] / torch_median[w['key']]:.2f}x"
        print(f"| {w['model']} | {w['who']} | {w['mode']} | {w['batch']} | {w['median'] * 1000:.1f} ms | "
              f"{w['batch'] / w['median']:.0f} | {ratio} | {gib(w['measured'])} | {gib(w['planned'])} | {gib(w['extra'])} |")


if __name__ == "__main__":
    main(sys.argv)
