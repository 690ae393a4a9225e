#!/usr/bin/env python3
"""OLLA's comparison with PyTorch's own allocator on a GPU (docs/REPRODUCTION.md "OLLA"): per zoo CNN and
batch size, one training step (forward, loss, backward, SGD with momentum) of

  - PyTorch (torchvision's model, eager, default caching allocator): torch.cuda.max_memory_allocated and
    max_memory_reserved over steps 2..N (the momentum buffers exist from step 1 on), in absolute bytes
    (weights, gradients, momentum and activations, as OLLA counts them);
  - mnemo (the same network from its zoo, `share` allocation, mnemo's order `greedy`, the exact
    placement with a 5 s limit): `mnemo bench --device cuda` with its planned total and its measured
    bytes (cudaMemGetInfo's peak minus the memory in use once the device, cuDNN and cuBLAS are open).

Prints one JSON line per run and a Markdown table last. Runs on the GPU machine (scripts/gpu-run.sh zoo);
`--pytorch-only` / `--mnemo-only` split it.

    python3 tools/zoo_gpu_peaks.py [--batches 1,32] [--models alexnet,...] [--mnemo gpu-dist/bin/mnemo]
"""
import argparse
import json
import os
import subprocess
import sys
import tempfile
import time

from zoo_models import MODELS, write_config


def pytorch_peak(name, batch, steps):
    import torch
    import torchvision

    torch.backends.cudnn.deterministic = True  # mnemo's convolutions use deterministic algorithms too
    torch.backends.cudnn.benchmark = False
    torch.backends.cuda.matmul.allow_tf32 = False
    torch.backends.cudnn.allow_tf32 = False
    dev = torch.device("cuda")
    torch.manual_seed(0)
    model = getattr(torchvision.models, name)(weights=None, num_classes=1000, **MODELS[name][2]).to(dev).train()
    opt = torch.optim.SGD(model.parameters(), lr=0.01, momentum=0.9, weight_decay=1e-4)
    x = torch.randn([batch] + MODELS[name][1], device=dev)
    y = torch.randint(0, 1000, (batch,), device=dev)
    times = []
    for step in range(steps):
        if step == 1:
            torch.cuda.synchronize()
            torch.cuda.reset_peak_memory_stats()
        t0 = time.perf_counter()
        opt.zero_grad(set_to_none=True)
        loss = torch.nn.functional.cross_entropy(model(x), y)
        loss.backward()
        opt.step()
        torch.cuda.synchronize()
        times.append(time.perf_counter() - t0)
    rec = dict(framework="pytorch", model=name, batch=batch, torch=torch.__version__, loss=float(loss),
               peak_allocated_bytes=torch.cuda.max_memory_allocated(), peak_reserved_bytes=torch.cuda.max_memory_reserved(),
               step_seconds_median=sorted(times[1:])[len(times[1:]) // 2])
    del model, opt, x, y, loss
    torch.cuda.empty_cache()
    return rec


def mnemo_peak(mnemo, name, batch, steps, tmp):
    cfg = os.path.join(tmp, f"{name}-b{batch}.yaml")
    write_config(cfg, name, batch)
    cmd = [mnemo, "bench", cfg, "--device", "cuda", "--memory", "share", "--order", "greedy", "--placement-seconds", "5",
           "--steps", str(steps), "--warmup", "1", "--json"]
    r = subprocess.run(cmd, capture_output=True, text=True)
    if r.returncode != 0:
        return dict(framework="mnemo", model=name, batch=batch, error=(r.stderr or r.stdout).strip()[-400:])
    rec = json.loads([l for l in r.stdout.splitlines() if l.startswith("{")][-1])
    rec.update(framework="mnemo", model=name, batch=batch)
    return rec


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--batches", default="1,32")
    ap.add_argument("--models", default=",".join(MODELS))
    ap.add_argument("--steps", type=int, default=3)
    ap.add_argument("--mnemo", default="gpu-dist/bin/mnemo")
    ap.add_argument("--pytorch-only", action="store_true")
    ap.add_argument("--mnemo-only", action="store_true")
    a = ap.parse_args()
    rows = {}
    with tempfile.TemporaryDirectory() as tmp:
        for name in a.models.split(","):
            if name not in MODELS:
                sys.exit(f"zoo_gpu_peaks: unknown model '{name}' (one of {', '.join(MODELS)})")
            for batch in map(int, a.batches.split(",")):
                for who in ("pytorch", "mnemo"):
                    if (who == "pytorch" and a.mnemo_only) or (who == "mnemo" and a.pytorch_only):
                        continue
                    try:
                        rec = pytorch_peak(name, batch, a.steps) if who == "pytorch" else mnemo_peak(a.mnemo, name, batch, a.steps, tmp)
                    except Exception as e:  # (an out-of-memory or a missing model: the row says so, the rest runs)
                        rec = dict(framework=who, model=name, batch=batch, error=f"{type(e).__name__}: {e}"[:400])
                    print(json.dumps(rec), flush=True)
                    rows.setdefault((name, batch), {})[who] = rec
    mib = lambda b: "-" if b is None else f"{b / 2**20:.1f}"
    print("| model | batch | PyTorch max allocated MiB | PyTorch max reserved MiB | mnemo planned total MiB | mnemo measured MiB | "
          "mnemo measured / PyTorch reserved |")
    print("|---|---:|---:|---:|---:|---:|---:|")
    for (name, batch), r in rows.items():
        t, m = r.get("pytorch", {}), r.get("mnemo", {})
        res, meas = t.get("peak_reserved_bytes"), m.get("device_measured_bytes")
        ratio = f"{meas / res:.3f}" if res and meas else "-"
        err = "; ".join(f"{k}: {v['error']}" for k, v in r.items() if "error" in v)
        print(f"| {name} | {batch} | {mib(t.get('peak_allocated_bytes'))} | {mib(res)} | {mib(m.get('total_bytes'))} | {mib(meas)} | {ratio} |"
              + (f" {err}" if err else ""))


if __name__ == "__main__":
    main()
