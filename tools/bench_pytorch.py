#!/usr/bin/env python3
"""PyTorch counterparts of `mnemo bench` (float32, CPU or one CUDA GPU), for tools/compare_pytorch.sh.

Models, built to do the same work as mnemo's builders (plain torch.nn, no torchvision):
  resnet56    models/resnet.cpp, style cifar, depth 56 (configs/resnet56-cifar.yaml): conv3x3-BN-ReLU stem with
              16 channels, 3 stages x 9 basic blocks of 16/32/64 channels (stride 2 in the first block of stages 2
              and 3), projection shortcut 1x1 conv + BN where the shape changes, global average pool, fc 64 -> 10,
              convolutions without bias; batch 64 of 3x32x32, 10 classes; SGD momentum 0.9, weight decay 1e-4.
  resnet50    models/resnet.cpp, style imagenet, bottleneck blocks [3, 4, 6, 3] (configs/resnet50-imagenet.yaml):
              stem conv7x7/2 (64, padding 3)-BN-ReLU, max pool 3x3/2 padding 1 (floor); 4 stages of bottleneck
              blocks with 64/128/256/512 mid channels and 4x expansion (256/512/1024/2048 out): conv1x1-BN-ReLU,
              conv3x3-BN-ReLU carrying the stride (2 in the first block of stages 2-4, as torchvision's v1.5),
              conv1x1-BN, plus the shortcut, then ReLU; the shortcut is the identity, else (stride != 1 or the
              channel count changes, so also block 0 of stage 1: 64 -> 256) a 1x1 conv (stride as the block) + BN;
              global average pool, fc 2048 -> 1000 with bias; convolutions without bias; BatchNorm eps 1e-5,
              momentum 0.1 (PyTorch's defaults, the same in mnemo: batch statistics with the biased variance in
              training, running variance updated with the unbiased one); batch 64 of 3x224x224, 1000 classes; SGD
              momentum 0.9, weight decay 1e-4. The layout is torchvision's resnet50 (25,557,032 parameters).
              resnet152: the same with blocks [3, 8, 36, 3] (configs/table2/resnet152.yaml), batch 16.
              Differences from mnemo, none of which changes the work: initialisation (PyTorch's defaults here;
              mnemo draws convolutions He-normal) and mnemo counting BN's running mean/var as (non-trainable)
              parameters where PyTorch keeps them as buffers ("params" counts trainable parameters only).
  lstm        models/lstm.cpp with per_step (configs/bench-lstm-2x512.yaml): 2 layers of nn.LSTMCell with 512 hidden,
              unrolled over 64 steps of time-major data [T, N, D] = [64, 32, 50], gates in the order i, f, g, o, a
              Linear(512 -> 5000) classifier applied at every step, loss = mean over steps of the batch-mean cross
              entropy; SGD momentum 0.9.
              As in mnemo, step t = 0 starts from h = c = 0 without an h term: it applies the cell's own weights
              (W_ih, b_ih + b_hh) and skips the W_hh product that nn.LSTMCell would spend on a zero state; steps
              t >= 1 call nn.LSTMCell. nn.LSTMCell keeps two bias vectors (b_ih, b_hh) where mnemo has one, so this
              model has 4H = 2048 more parameters per layer; the extra bias is folded into the addmm calls.
              The unrolling order differs but not the work: here layer by layer (all steps of layer 0, then
              layer 1), mnemo step by step (all layers of step t, then step t + 1).
  densenet121, inception_v3
              torchvision's own models (weights=None; Inception-v3 with aux_logits=False, init_weights=False, its
              dropout active in training mode as mnemo's), the counterparts of models/zoo.cpp's builders
              (configs/table2/densenet121.yaml, configs/table2/inception_v3.yaml); batch 8 at 224x224 / 299x299,
              1000 classes, mean cross-entropy; SGD momentum 0.9, weight decay 1e-4.
  lstm-paper  the same code with the paper's sizes (configs/lstm-paper.yaml): 4 layers x 1024 hidden, 64 steps,
              batch 64, 50-dim inputs, per-step classifier over 5000 classes (4 x 4096 extra bias parameters).

A step is timed as zero_grad + forward + backward + optimizer.step on one fixed synthetic batch (mnemo times
executor run + SGD update; its static graph has nothing to zero). The median is sorted_times[n // 2], as in
mnemo's run_bench. Every model runs in a fresh child process so that its peak RSS (getrusage ru_maxrss) is its
own: peak_rss_growth_bytes = ru_maxrss after the timed steps - ru_maxrss before the model is built.

--device cuda: model and data on the GPU (the data made on the CPU from the same seed, then copied), float32 with
strict float32 maths like mnemo (cudnn.allow_tf32 = cuda.matmul.allow_tf32 = False, cudnn.deterministic = True,
cudnn.benchmark = False); --tf32 allows TF32 in matmuls and convolutions instead (deterministic and benchmark as
before). Each step is timed between two torch.cuda.synchronize() calls. Extra JSON fields on cuda:
  device, gpu, cuda, cudnn, tf32         "cuda", the GPU's name, torch.version.cuda, cudnn version, --tf32 given
  examples_per_second                    batch / step_seconds_median (sequences/s for the LSTMs)
  param_bytes                            4 x the trainable parameter count
  model_bytes                            torch.cuda.memory_allocated() once model, optimizer and the synthetic batch
                                         are on the GPU (parameters + BN buffers + data; PyTorch's SGD makes its
                                         momentum buffers at the first step, so they are not in it)
  momentum_bytes                         bytes of the SGD momentum buffers after the run
  peak_allocated_bytes                   torch.cuda.max_memory_allocated() over the whole run, model creation included
  step_peak_allocated_bytes              max_memory_allocated() since the reset right before the first step (the
                                         model, optimizer and data stay allocated, so they are in it)
  peak_reserved_bytes                    torch.cuda.max_memory_reserved() over the whole run (caching allocator)
Compare with `mnemo bench CONFIG --device cuda --json` (device_peak_in_use_bytes, device_measured_bytes).

Prints one JSON line per model. Usage:
  python tools/bench_pytorch.py [--model NAME[,NAME...]|all] [--device cpu|cuda] [--tf32] [--threads T]
                                [--steps N] [--warmup K] [--batch B] [--seed S] [--checkpoint none|sequential:K|block|segment:K]
"""

import argparse
import functools
import json
import os
import resource
import subprocess
import sys
import time

MODELS = ("resnet56", "lstm", "resnet50", "lstm-paper", "densenet121", "inception_v3", "resnet152")
RESNETS = ("resnet56", "resnet50", "resnet152")  # build_resnet's: --checkpoint sequential:K and block
DEFAULT_BATCH = {"resnet56": 64, "lstm": 32, "resnet50": 64, "lstm-paper": 64, "densenet121": 8, "inception_v3": 8,
                 "resnet152": 16}


def parse_args(argv):
    p = argparse.ArgumentParser(description="PyTorch step times of mnemo's benchmark models (one JSON line per model)")
    p.add_argument("--model", default="all",
                   help="model(s) to time, comma-separated, each in its own process: %s, or all (default)" % ", ".join(MODELS))
    p.add_argument("--device", choices=("cpu", "cuda"), default="cpu", help="where to run (default: %(default)s)")
    p.add_argument("--tf32", action="store_true", help="cuda only: allow TF32 in matmuls and convolutions (default: strict float32)")
    p.add_argument("--threads", type=int, default=os.cpu_count(), help="torch.set_num_threads (default: os.cpu_count() = %(default)s)")
    p.add_argument("--steps", type=int, default=10, help="timed steps (default: %(default)s, as mnemo bench)")
    p.add_argument("--warmup", type=int, default=2, help="untimed steps first (default: %(default)s, as mnemo bench)")
    p.add_argument("--batch", type=int, default=0,
                   help="batch size (default: the model's: %s)" % ", ".join("%s %d" % kv for kv in DEFAULT_BATCH.items()))
    p.add_argument("--profile", action="store_true",
                   help="after the timed steps, 3 steps under torch.profiler: a table of the kernels' device time per op (cuda)")
    p.add_argument("--seed", type=int, default=1, help="torch.manual_seed (default: %(default)s)")
    p.add_argument("--checkpoint-segments", type=int, default=0,
                   help="resnet56/resnet50/resnet152: run the model through torch.utils.checkpoint.checkpoint_sequential with this "
                        "many segments (use_reentrant=False; each segment's BatchNorm statistics are updated twice, as "
                        "PyTorch does); 0: plain (default). Same as --checkpoint sequential:K")
    p.add_argument("--checkpoint", default="none",
                   help="PyTorch's activation checkpointing (torch.utils.checkpoint, use_reentrant=False): none "
                        "(default); sequential:K (resnet56/resnet50/resnet152: checkpoint_sequential with K segments); block "
                        "(resnet56/resnet50/resnet152: every residual block checkpointed on its own); segment:K (lstm/lstm-paper: "
                        "the sequence cut into time segments of K steps, each checkpointed with every layer's cells "
                        "and the per-step classifier and loss inside); efficient (densenet121: torchvision's "
                        "memory_efficient=True, each dense layer's concatenation, batch norm, ReLU and 1x1 convolution "
                        "checkpointed)")
    a = p.parse_args(argv)
    if a.threads < 1 or a.steps < 1 or a.warmup < 0 or a.batch < 0:
        p.error("--threads and --steps must be >= 1, --warmup and --batch >= 0")
    a.models = list(MODELS) if a.model == "all" else a.model.split(",")
    bad = [m for m in a.models if m not in MODELS]
    if bad or not a.models:
        p.error("--model: unknown model %s (choose from %s, or all)" % (", ".join(map(repr, bad)), ", ".join(MODELS)))
    if a.tf32 and a.device != "cuda":
        p.error("--tf32 needs --device cuda")
    if a.checkpoint_segments < 0 or (a.checkpoint_segments and any(m not in RESNETS for m in a.models)):
        p.error("--checkpoint-segments: a positive count, for resnet56, resnet50 or resnet152 only")
    if a.checkpoint_segments:
        if a.checkpoint != "none":
            p.error("--checkpoint-segments and --checkpoint: give one of them")
        a.checkpoint = "sequential:%d" % a.checkpoint_segments
    kind, _, count = a.checkpoint.partition(":")
    lstms = ("lstm", "lstm-paper")
    wants = {"none": (None, False), "sequential": (RESNETS, True), "block": (RESNETS, False), "segment": (lstms, True),
             "efficient": (("densenet121",), False)}
    if kind not in wants:
        p.error("--checkpoint: expected none, sequential:K, block, segment:K or efficient, got %r" % a.checkpoint)
    models_ok, needs_count = wants[kind]
    if needs_count != bool(count) or (count and not (count.isdigit() and int(count) > 0)):
        p.error("--checkpoint %s: %s" % (a.checkpoint, "expected %s:K with K a positive integer" % kind if needs_count
                                         else "takes no count"))
    if models_ok and any(m not in models_ok for m in a.models):
        p.error("--checkpoint %s: for %s only" % (kind, " or ".join(models_ok)))
    a.checkpoint_kind, a.checkpoint_count = kind, int(count or 0)
    return a


def max_rss_bytes():
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024  # Linux: KiB


def build_resnet(torch, batch, device, style, blocks, block, shape, classes):
    """models/resnet.cpp's build_resnet: conv-BN-ReLU ordering, projection shortcuts, global average pool, fc."""
    nn = torch.nn

    def conv_bn(cin, cout, k, stride):
        return [nn.Conv2d(cin, cout, k, stride=stride, padding=k // 2, bias=False), nn.BatchNorm2d(cout)]

    def shortcut(cin, cout, stride):
        return nn.Sequential(*conv_bn(cin, cout, 1, stride)) if stride != 1 or cin != cout else nn.Identity()

    class Basic(nn.Module):
        expansion = 1

        def __init__(self, cin, w, stride):
            super().__init__()
            self.body = nn.Sequential(*conv_bn(cin, w, 3, stride), nn.ReLU(inplace=True), *conv_bn(w, w, 3, 1))
            self.shortcut = shortcut(cin, w, stride)
            self.relu = nn.ReLU(inplace=True)

        def forward(self, x):
            if getattr(self, "checkpointed", False):
                return torch.utils.checkpoint.checkpoint(self.inner, x, use_reentrant=False)
            return self.inner(x)

        def inner(self, x):
            return self.relu(self.body(x) + self.shortcut(x))

    class Bottleneck(nn.Module):
        expansion = 4

        def __init__(self, cin, mid, stride):  # the stride sits on the 3x3 conv
            super().__init__()
            out = 4 * mid
            self.body = nn.Sequential(*conv_bn(cin, mid, 1, 1), nn.ReLU(inplace=True),
                                      *conv_bn(mid, mid, 3, stride), nn.ReLU(inplace=True),
                                      *conv_bn(mid, out, 1, 1))
            self.shortcut = shortcut(cin, out, stride)
            self.relu = nn.ReLU(inplace=True)

        forward, inner = Basic.forward, Basic.inner

    Block = Basic if block == "basic" else Bottleneck
    if style == "cifar":
        width = 16
        layers = [*conv_bn(shape[0], width, 3, 1), nn.ReLU(inplace=True)]
    else:
        width = 64
        layers = [*conv_bn(shape[0], width, 7, 2), nn.ReLU(inplace=True), nn.MaxPool2d(3, stride=2, padding=1)]
    cin = width
    for s, n in enumerate(blocks):
        w = width << s
        for k in range(n):
            layers.append(Block(cin, w, 2 if s > 0 and k == 0 else 1))
            cin = w * Block.expansion
    layers += [nn.AdaptiveAvgPool2d(1), nn.Flatten(), nn.Linear(cin, classes)]
    model = nn.Sequential(*layers).to(device)
    x = (torch.rand(batch, *shape) * 2 - 1).to(device)
    y = torch.randint(0, classes, (batch,)).to(device)
    loss_fn = nn.CrossEntropyLoss()
    model.bench_input = (x, y, loss_fn)  # for --checkpoint sequential:K
    model.blocks = [l for l in layers if isinstance(l, Block)]  # for --checkpoint block

    def step_loss():
        return loss_fn(model(x), y)

    return model, step_loss, 1e-4


def build_lstm(torch, batch, device, steps=64, input_dim=50, hidden=512, layers=2, classes=5000):
    nn = torch.nn
    F = torch.nn.functional

    class Net(nn.Module):
        def __init__(self):
            super().__init__()
            self.cells = nn.ModuleList(nn.LSTMCell(input_dim if l == 0 else hidden, hidden) for l in range(layers))
            self.classifier = nn.Linear(hidden, classes)

        def cell_step(self, l, t, x, h, c):
            cell = self.cells[l]
            if t == 0:  # zero state: no W_hh term, c = i * g (mnemo's step 0)
                i, _, g, o = F.linear(x, cell.weight_ih, cell.bias_ih + cell.bias_hh).chunk(4, 1)
                c = torch.sigmoid(i) * torch.tanh(g)
                return torch.sigmoid(o) * torch.tanh(c), c
            return cell(x, (h, c))

        def segment(self, t0, xs, ys, *state):
            """Steps t0 .. t0 + len(xs) - 1, step by step through every layer; returns the sum of the
            steps' losses and each layer's (h, c) after the last step. --checkpoint segment:K."""
            state, loss = list(state), 0
            for k in range(xs.shape[0]):
                h = xs[k]
                for l in range(len(self.cells)):
                    state[2 * l], state[2 * l + 1] = self.cell_step(l, t0 + k, h, state[2 * l], state[2 * l + 1])
                    h = state[2 * l]
                loss = loss + F.cross_entropy(self.classifier(h), ys[k])
            return (loss, *state)

        def forward_segments(self, x, y, k):
            state = [torch.zeros(x.shape[1], hidden, device=x.device)] * (2 * len(self.cells))
            total = 0
            for t0 in range(0, x.shape[0], k):
                loss, *state = torch.utils.checkpoint.checkpoint(self.segment, t0, x[t0:t0 + k], y[t0:t0 + k], *state,
                                                                 use_reentrant=False)
                total = total + loss
            return total / x.shape[0]

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

    model = Net().to(device)
    x = (torch.rand(steps, batch, input_dim) * 2 - 1).to(device)
    y = torch.randint(0, classes, (steps, batch)).to(device)
    model.segments_loss = lambda k: model.forward_segments(x, y, k)  # for --checkpoint segment:K
    return model, lambda: model(x, y), 0.0


def build_torchvision(torch, batch, device, name, size, classes=1000, **kwargs):
    """torchvision's model `name` (weights None) on a fixed batch of 3 x size x size images."""
    import torchvision
    model = getattr(torchvision.models, name)(weights=None, num_classes=classes, **kwargs).to(device)
    x = torch.randn(batch, 3, size, size).to(device)
    y = torch.randint(0, classes, (batch,)).to(device)
    return model, lambda: torch.nn.functional.cross_entropy(model(x), y), 1e-4


BUILDERS = {
    "densenet121": functools.partial(build_torchvision, name="densenet121", size=224),
    "inception_v3": functools.partial(build_torchvision, name="inception_v3", size=299, aux_logits=False, init_weights=False),
    "resnet56": functools.partial(build_resnet, style="cifar", blocks=(9, 9, 9), block="basic", shape=(3, 32, 32), classes=10),
    "resnet50": functools.partial(build_resnet, style="imagenet", blocks=(3, 4, 6, 3), block="bottleneck",
                                  shape=(3, 224, 224), classes=1000),
    "resnet152": functools.partial(build_resnet, style="imagenet", blocks=(3, 8, 36, 3), block="bottleneck",
                                   shape=(3, 224, 224), classes=1000),
    "lstm": build_lstm,
    "lstm-paper": functools.partial(build_lstm, steps=64, input_dim=50, hidden=1024, layers=4, classes=5000),
}


def run_one(a, name):
    cuda = a.device == "cuda"
    if not cuda:
        os.environ["CUDA_VISIBLE_DEVICES"] = ""  # CPU only, and no CUDA initialisation
    import torch
    import torch.utils.checkpoint  # noqa: F401 (torch.utils.checkpoint.checkpoint in the models)

    if cuda:
        if not torch.cuda.is_available():
            raise SystemExit("bench_pytorch: --device cuda but torch.cuda.is_available() is False (torch %s)" % torch.__version__)
        torch.backends.cuda.matmul.allow_tf32 = a.tf32
        torch.backends.cudnn.allow_tf32 = a.tf32
        torch.backends.cudnn.deterministic = True
        torch.backends.cudnn.benchmark = False
    device = torch.device(a.device)
    torch.set_num_threads(a.threads)
    torch.manual_seed(a.seed)
    rss0 = max_rss_bytes()
    batch = a.batch or DEFAULT_BATCH[name]
    build = BUILDERS[name]
    if a.checkpoint_kind == "efficient":
        build = functools.partial(build, memory_efficient=True)
    model, step_loss, weight_decay = build(torch, batch, device)
    model.train()
    if a.checkpoint_kind == "sequential":
        from torch.utils.checkpoint import checkpoint_sequential
        x, y, loss_fn = model.bench_input

        def step_loss():
            return loss_fn(checkpoint_sequential(model, a.checkpoint_count, x, use_reentrant=False), y)
    elif a.checkpoint_kind == "block":
        for b in model.blocks:
            b.checkpointed = True
    elif a.checkpoint_kind == "segment":
        def step_loss():
            return model.segments_loss(a.checkpoint_count)
    opt = torch.optim.SGD(model.parameters(), lr=1e-3, momentum=0.9, weight_decay=weight_decay)
    if cuda:
        torch.cuda.synchronize()
        model_bytes = torch.cuda.memory_allocated()
        build_peak_allocated = torch.cuda.max_memory_allocated()
        build_peak_reserved = torch.cuda.max_memory_reserved()
        torch.cuda.reset_peak_memory_stats()
    times = []
    for i in range(a.warmup + a.steps):
        if cuda:
            torch.cuda.synchronize()
        t0 = time.perf_counter()
        opt.zero_grad(set_to_none=True)
        loss = step_loss()
        loss.backward()
        opt.step()
        if cuda:
            torch.cuda.synchronize()
        dt = time.perf_counter() - t0
        if not torch.isfinite(loss).item():
            raise SystemExit("bench_pytorch: %s: loss is not finite at step %d" % (name, i))
        if i >= a.warmup:
            times.append(dt)
    times.sort()
    rss1 = max_rss_bytes()
    params = sum(p.numel() for p in model.parameters())
    out = {
        "framework": "pytorch",
        "model": name,
        "batch": batch,
        "threads": torch.get_num_threads(),
        "torch": torch.__version__,
        "params": params,
        "step_seconds_median": times[len(times) // 2],
        "step_seconds_min": times[0],
        "step_seconds_max": times[-1],
        "steps": a.steps,
        "warmup": a.warmup,
        "peak_rss_bytes": rss1,
        "peak_rss_growth_bytes": rss1 - rss0,
        "checkpoint_segments": a.checkpoint_count if a.checkpoint_kind == "sequential" else 0,
        "checkpoint": a.checkpoint,
        "malloc_env": {k: os.environ[k] for k in ("MALLOC_MMAP_THRESHOLD_", "MALLOC_TRIM_THRESHOLD_") if k in os.environ},
    }
    if cuda:
        step_peak_allocated = torch.cuda.max_memory_allocated()
        out.update({
            "device": "cuda",
            "gpu": torch.cuda.get_device_name(),
            "cuda": torch.version.cuda,
            "cudnn": torch.backends.cudnn.version(),
            "tf32": a.tf32,
            "examples_per_second": batch / out["step_seconds_median"],
            "param_bytes": 4 * params,
            "model_bytes": model_bytes,
            "momentum_bytes": sum(s["momentum_buffer"].numel() * s["momentum_buffer"].element_size()
                                  for s in opt.state.values() if s.get("momentum_buffer") is not None),
            "peak_allocated_bytes": max(build_peak_allocated, step_peak_allocated),
            "step_peak_allocated_bytes": step_peak_allocated,
            "peak_reserved_bytes": max(build_peak_reserved, torch.cuda.max_memory_reserved()),
        })
    print(json.dumps(out), flush=True)
    if a.profile and cuda:
        from torch.profiler import ProfilerActivity, profile
        with profile(activities=[ProfilerActivity.CPU, ProfilerActivity.CUDA]) as prof:
            for _ in range(3):
                opt.zero_grad(set_to_none=True)
                loss = step_loss()
                loss.backward()
                opt.step()
            torch.cuda.synchronize()
        print("profile of 3 steps (device time per kernel, summed):")
        print(prof.key_averages().table(sort_by="self_device_time_total", row_limit=30, max_name_column_width=70))


def main(argv):
    a = parse_args(argv)
    if len(a.models) == 1:
        run_one(a, a.models[0])
        return 0
    rc = 0
    for m in a.models:
        child = [sys.executable, os.path.abspath(__file__), "--model", m, "--device", a.device, "--threads", str(a.threads),
                 "--steps", str(a.steps), "--warmup", str(a.warmup), "--batch", str(a.batch), "--seed", str(a.seed)]
        if a.tf32:
            child.append("--tf32")
        child += ["--checkpoint", a.checkpoint]
        r = subprocess.run(child)
        if r.returncode != 0:
            print("bench_pytorch: model %s failed (exit %d)" % (m, r.returncode), file=sys.stderr)
            rc = 1
    return rc


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
