#!/usr/bin/env python3
"""The largest batch that trains, per memory mode and beside PyTorch (plain and checkpointed).

For each runner the batch is doubled from --lo until a step fails, then bisected until the bracket is
within --tol (relative) or 1: the answer is the largest batch that ran, with the smallest that did not.
A run is one training step in a fresh process:
  mnemo MODE        mnemo bench CONFIG --device DEV --memory MODE --batch B --steps 1 --warmup 0 --json
                    (a batch whose plan does not fit the device is refused by the pre-flight check before
                    anything is allocated; a refusal counts as a failure, as an out-of-memory error does)
  torch VARIANT     python3 tools/bench_pytorch.py --device DEV --model MODEL --batch B --steps 1 --warmup 0
                    [--checkpoint VARIANT]  (plain: no checkpointing)
Success is exit status 0. Each run's status, time and memory (mnemo's measured and planned bytes,
PyTorch's max_memory_reserved/allocated) go to --out as JSON lines; a Markdown table is printed last.

Usage: python3 tools/batch_sweep.py --mnemo gpu-dist/bin/mnemo --config configs/resnet50-imagenet.yaml \\
           --modes share,sublinear,recursive --torch plain,sequential:4 --model resnet50 --device cuda
"""

import argparse
import json
import os
import subprocess
import sys
import time


def run(cmd, timeout):
    t0 = time.time()
    try:
        p = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout)
        rc, out, err = p.returncode, p.stdout, p.stderr
    except subprocess.TimeoutExpired:
        rc, out, err = 124, "", "timed out"
    rec = None
    for line in out.splitlines():
        if line.startswith("{"):
            try:
                rec = json.loads(line)
            except json.JSONDecodeError:
                pass
    tail = (err.strip().splitlines() or [""])[-1][:200]
    return rc, rec, tail, time.time() - t0


def largest(name, make_cmd, lo, hi, tol, timeout, log):
    """Largest batch in [lo, hi] whose run succeeds (None if lo fails), and the least failing one."""
    results = {}

    def ok(b):
        if b not in results:
            rc, rec, tail, secs = run(make_cmd(b), timeout)
            results[b] = rc == 0
            entry = {"runner": name, "batch": b, "rc": rc, "seconds": round(secs, 1), "result": rec, "stderr_tail": tail}
            log.write(json.dumps(entry) + "\n")
            log.flush()
            print(f"  {name:24s} batch {b:6d}: {'ok' if rc == 0 else 'fails (rc %d: %s)' % (rc, tail[:100])} ({secs:.1f} s)",
                  flush=True)
        return results[b]

    if not ok(lo):
        return None, lo, results
    good, bad = lo, None
    while bad is None:
        nxt = min(hi, good * 2)
        if nxt == good:
            return good, None, results  # hi reached
        if ok(nxt):
            good = nxt
        else:
            bad = nxt
    while bad - good > max(1, int(tol * good)):
        mid = (good + bad) // 2
        if ok(mid):
            good = mid
        else:
            bad = mid
    return good, bad, results


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--mnemo", default="build/mnemo")
    ap.add_argument("--config", default="configs/resnet50-imagenet.yaml")
    ap.add_argument("--modes", default="share,sublinear,recursive", help="mnemo memory modes, comma-separated ('' for none)")
    ap.add_argument("--torch", default="plain", help="PyTorch variants: plain or a --checkpoint value of tools/bench_pytorch.py ('' for none)")
    ap.add_argument("--model", default="resnet50", help="tools/bench_pytorch.py --model")
    ap.add_argument("--device", default="cuda")
    ap.add_argument("--lo", type=int, default=16)
    ap.add_argument("--hi", type=int, default=4096)
    ap.add_argument("--tol", type=float, default=0.03, help="relative width of the final bracket (default: %(default)s)")
    ap.add_argument("--timeout", type=float, default=120, help="seconds per run (default: %(default)s)")
    ap.add_argument("--out", default="batch_sweep.jsonl")
    a = ap.parse_args()
    here = os.path.dirname(os.path.abspath(__file__))
    runners = []
    for m in filter(None, a.modes.split(",")):
        runners.append((f"mnemo {m}", lambda b, m=m: [a.mnemo, "bench", a.config, "--device", a.device, "--memory", m, "--batch",
                                                        str(b), "--steps", "1", "--warmup", "0", "--json"]))
    for v in filter(None, a.torch.split(",")):
        extra = [] if v == "plain" else ["--checkpoint", v]
        runners.append((f"torch {v}", lambda b, extra=extra: [sys.executable, os.path.join(here, "bench_pytorch.py"), "--device", a.device,
                                                             "--model", a.model, "--batch", str(b), "--steps", "1", "--warmup", "0"] + extra))
    rows = []
    with open(a.out, "w", encoding="utf-8") as log:
        for name, make in runners:
            print(f"{name}: searching batches {a.lo}..{a.hi}", flush=True)
            good, bad, results = largest(name, make, a.lo, a.hi, a.tol, a.timeout, log)
            rows.append((name, good, bad, len(results)))
    base = next((g for n, g, _, _ in rows if n == "torch plain" and g), None)
    print("\n| runner | largest batch that trained | least that did not | runs | vs PyTorch plain |")
    print("|---|---:|---:|---:|---:|")
    for name, good, bad, n in rows:
        ratio = f"{good / base:.2f}x" if base and good else "-"
        print(f"| {name} | {good if good else '< %d' % a.lo} | {bad if bad else '> %d (the search stopped there)' % a.hi} | {n} | {ratio} |")


if __name__ == "__main__":
    main()
