#!/usr/bin/env python3
"""PyTorch counterparts of `mnemo bench` (CPU, float32), for tools/compare_pytorch.sh.

Models, built to do the same work as mnemo's builders:
  resnet56  models/resnet.cpp, style cifar, depth 56 (configs/resnet56-cifar.yaml): conv3x3-BN-ReLU stem with
            16 channels, 3 stages x 9 basic blocks of 16/32/64 channels (stride 2 in the first block of stages 2
            and 3), projection shortcut 1x1 conv + BN where the shape changes, global average pool, fc 64 -> 10,
            convolutions without bias; batch 64 of 3x32x32, 10 classes; SGD momentum 0.9, weight decay 1e-4.
  lstm      models/lstm.cpp with per_step (configs/bench-lstm-2x512.yaml): 2 layers of nn.LSTMCell with 512 hidden,
            unrolled over 64 steps of time-major data [T, N, D] = [64, 32, 50], gates in the order i, f, g, o, a
            Linear(512 -> 5000) classifier applied at every step, loss = mean over steps of the batch-mean cross
            entropy; SGD momentum 0.9.
            As in mnemo, step t = 0 starts from h = c = 0 without an h term: it applies the cell's own weights
            (W_ih, b_ih + b_hh) and skips the W_hh product that nn.LSTMCell would spend on a zero state; steps
            t >= 1 call nn.LSTMCell. nn.LSTMCell keeps two bias vectors (b_ih, b_hh) where mnemo has one, so this
            model has 4H = 2048 more parameters per layer; the extra bias is folded into the addmm calls.

A step is timed as zero_grad + forward + backward + optimizer.step on one fixed synthetic batch (mnemo times
executor run + SGD update; its static graph has nothing to zero). The median is sorted_times[n // 2], as in
mnemo's run_bench. Every model runs in a fresh child process so that its peak RSS (getrusage ru_maxrss) is its
own: peak_rss_growth_bytes = ru_maxrss after the timed steps - ru_maxrss before the model is built.

Prints one JSON line per model. Usage:
  /work/venv-torch/bin/python tools/bench_pytorch.py [--model resnet56|lstm|all] [--threads T] [--steps N] [--warmup K]
"""

import argparse
import json
import os
import resource
import subprocess
import sys
import time

MODELS = ("resnet56", "lstm")


def parse_args(argv):
    p = argparse.ArgumentParser(description="PyTorch CPU step times of mnemo's benchmark models (one JSON line per model)")
    p.add_argument("--model", choices=MODELS + ("all",), default="all", help="model to time (default: all, each in its own process)")
    p.add_argument("--threads", type=int, default=os.cpu_count(), help="torch.set_num_threads (default: os.cpu_count() = %(default)s)")
    p.add_argument("--steps", type=int, default=10, help="timed steps (default: %(default)s, as mnemo bench)")
    p.add_argument("--warmup", type=int, default=2, help="untimed steps first (default: %(default)s, as mnemo bench)")
    p.add_argument("--batch", type=int, default=0, help="batch size (default: the model's, resnet56 64, lstm 32)")
    p.add_argument("--seed", type=int, default=1, help="torch.manual_seed (default: %(default)s)")
    a = p.parse_args(argv)
    if a.threads < 1 or a.steps < 1 or a.warmup < 0 or a.batch < 0:
        p.error("--threads and --steps must be >= 1, --warmup and --batch >= 0")
    return a


def max_rss_bytes():
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024  # Linux: KiB


def build_resnet56(torch, batch):
    nn = torch.nn

    def conv_bn(cin, cout, k, stride):
        return [nn.Conv2d(cin, cout, k, stride=stride, padding=k // 2, bias=False), nn.BatchNorm2d(cout)]

    class Basic(nn.Module):
        def __init__(self, cin, cout, stride):
            super().__init__()
            self.body = nn.Sequential(*conv_bn(cin, cout, 3, stride), nn.ReLU(inplace=True), *conv_bn(cout, cout, 3, 1))
            self.shortcut = nn.Sequential(*conv_bn(cin, cout, 1, stride)) if stride != 1 or cin != cout else nn.Identity()
            self.relu = nn.ReLU(inplace=True)

        def forward(self, x):
            return self.relu(self.body(x) + self.shortcut(x))

    n = (56 - 2) // 6
    layers = [*conv_bn(3, 16, 3, 1), nn.ReLU(inplace=True)]
    cin = 16
    for s in range(3):
        w = 16 << s
        for k in range(n):
            layers.append(Basic(cin, w, 2 if s > 0 and k == 0 else 1))
            cin = w
    layers += [nn.AdaptiveAvgPool2d(1), nn.Flatten(), nn.Linear(cin, 10)]
    model = nn.Sequential(*layers)
    x = torch.rand(batch, 3, 32, 32) * 2 - 1
    y = torch.randint(0, 10, (batch,))
    loss_fn = nn.CrossEntropyLoss()

    def step_loss():
        return loss_fn(model(x), y)

    return model, step_loss, 1e-4


def build_lstm(torch, batch, steps=64, input_dim=50, hidden=512, layers=2, classes=5000):
    nn = torch.nn
    F = torch.nn.functional

    class Net(nn.Module):
        def __init__(self):
            super().__init__()
            self.cells = nn.ModuleList(nn.LSTMCell(input_dim if l == 0 else hidden, hidden) for l in range(layers))
            self.classifier = nn.Linear(hidden, classes)

        def forward(self, x, y):  # x [T, N, D] float32, y [T, N] int64
            seq = list(x.unbind(0))
            for cell in self.cells:
                h = c = None
                for t in range(len(seq)):
                    if t == 0:  # zero state: no W_hh term, c = i * g (mnemo's step 0)
                        i, _, g, o = F.linear(seq[0], cell.weight_ih, cell.bias_ih + cell.bias_hh).chunk(4, 1)
                        c = torch.sigmoid(i) * torch.tanh(g)
                        h = torch.sigmoid(o) * torch.tanh(c)
                    else:
                        h, c = cell(seq[t], (h, c))
                    seq[t] = h
            losses = [F.cross_entropy(self.classifier(seq[t]), y[t]) for t in range(len(seq))]
            return torch.stack(losses).mean()

    model = Net()
    x = torch.rand(steps, batch, input_dim) * 2 - 1
    y = torch.randint(0, classes, (steps, batch))
    return model, lambda: model(x, y), 0.0


def run_one(a):
    os.environ["CUDA_VISIBLE_DEVICES"] = ""  # CPU only, and no CUDA initialisation
    import torch

    torch.set_num_threads(a.threads)
    torch.manual_seed(a.seed)
    rss0 = max_rss_bytes()
    batch = a.batch or {"resnet56": 64, "lstm": 32}[a.model]
    build = build_resnet56 if a.model == "resnet56" else build_lstm
    model, step_loss, weight_decay = build(torch, batch)
    model.train()
    opt = torch.optim.SGD(model.parameters(), lr=1e-3, momentum=0.9, weight_decay=weight_decay)
    times = []
    for i in range(a.warmup + a.steps):
        t0 = time.perf_counter()
        opt.zero_grad(set_to_none=True)
        loss = step_loss()
        loss.backward()
        opt.step()
        dt = time.perf_counter() - t0
        if not torch.isfinite(loss).item():
            raise SystemExit("bench_pytorch: %s: loss is not finite at step %d" % (a.model, i))
        if i >= a.warmup:
            times.append(dt)
    times.sort()
    rss1 = max_rss_bytes()
    print(json.dumps({
        "framework": "pytorch",
        "model": a.model,
        "batch": batch,
        "threads": torch.get_num_threads(),
        "torch": torch.__version__,
        "params": sum(p.numel() for p in model.parameters()),
        "step_seconds_median": times[len(times) // 2],
        "step_seconds_min": times[0],
        "step_seconds_max": times[-1],
        "steps": a.steps,
        "warmup": a.warmup,
        "peak_rss_bytes": rss1,
        "peak_rss_growth_bytes": rss1 - rss0,
    }), flush=True)


def main(argv):
    a = parse_args(argv)
    if a.model != "all":
        run_one(a)
        return 0
    rc = 0
    for m in MODELS:
        child = [sys.executable, os.path.abspath(__file__), "--model", m, "--threads", str(a.threads), "--steps", str(a.steps),
                 "--warmup", str(a.warmup), "--batch", str(a.batch), "--seed", str(a.seed)]
        r = subprocess.run(child)
        if r.returncode != 0:
            print("bench_pytorch: model %s failed (exit %d)" % (m, r.returncode), file=sys.stderr)
            rc = 1
    return rc


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
