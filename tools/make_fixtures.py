#!/usr/bin/env python3
"""Golden fixtures for mnemo's PyTorch match test and safetensors compatibility test.

Regenerate (needs torch and safetensors; the C++ tests read the committed files and need neither):

    /work/venv-torch/bin/python tools/make_fixtures.py            # writes tests/fixtures/
    /work/venv-torch/bin/python tools/make_fixtures.py --out DIR
    /work/venv-torch/bin/python tools/make_fixtures.py --check FILE   # print a mnemo-written file

For each model (resnet, lstm, densenet, inception_a, inception_b, inception_c; --models picks some)
it writes, in float32 unless noted:
    <model>_init.safetensors      every mnemo parameter by its mnemo name (incl. BN running stats)
    <model>_batch.safetensors     "data" and "labels" (int32)
    <model>_expected.safetensors  "loss" (rank 0), "grad/<name>" for every trainable parameter (the
                                  first step), "losses_10" (float64 [10]: the loss before each of 10
                                  SGD steps, lr 0.05, momentum 0.9, weight decay 1e-4, PyTorch SGD,
                                  same batch every step) and "running/<name>" (BN running stats after
                                  those 10 steps; resnet only)
and compat_python.safetensors (a few tensors written by the Python safetensors package).

The PyTorch models are built from torch.nn modules so that the layouts are PyTorch's own:
    resnet = mnemo ResNetConfig{style cifar, depth 8, batch 4, channels 3, height 8, width 8,
             classes 5, width_base 4} (models/resnet.cpp): Conv2d(bias=False) [K,C,R,S],
             BatchNorm2d(eps 1e-5, momentum 0.1, training mode), projection shortcut (1x1 conv + BN)
             where the shape changes, global average pool, Linear [M,D] + bias, mean cross-entropy.
    lstm   = mnemo LstmConfig{steps 3, batch 4, input 5, hidden 6, layers 2, classes 7, per_step}
             (models/lstm.cpp): nn.LSTMCell per layer with weight_ih = lstmL/wx, weight_hh = lstmL/wh,
             bias_ih = lstmL/bias and bias_hh fixed at 0 (mnemo's single bias is b_ih + b_hh);
             per-step Linear classifier; loss = mean over steps of the per-step mean cross-entropy;
             data [T,N,D] time-major, labels [T,N].
    densenet = torchvision's DenseNet(growth_rate 4, block_config (2, 2), num_init_features 8,
             bn_size 2, 5 classes) = mnemo's model.type densenet with those keys; names are
             torchvision's with / for . and batch norm weight/bias as gamma/beta (models/zoo.h)
    inception_<k> = models/zoo.cpp's build_inception_block_net(k, batch 3, 9x9, width 8, c 4, 5
             classes): torchvision's BasicConv2d stem and Inception<K> block, average pool, fc
    (densenet and inception_<k>: the expected values computed in float64 from the float32 initial
    values, then stored as float32)
docs/FORMATS.md describes the files and the naming scheme.
"""
import argparse
import copy
import os

import torch
import torch.nn as nn
import torch.nn.functional as F
from safetensors.torch import load_file, save_file

SGD = dict(lr=0.05, momentum=0.9, weight_decay=1e-4)
STEPS = 10


# ---- ResNet (cifar style) ----

class ConvBN(nn.Module):
    def __init__(self, cin, cout, k, stride):
        super().__init__()
        self.conv = nn.Conv2d(cin, cout, k, stride, k // 2, bias=False)
        self.bn = nn.BatchNorm2d(cout, eps=1e-5, momentum=0.1)

    def forward(self, x):
        return self.bn(self.conv(x))


class Basic(nn.Module):
    def __init__(self, cin, cout, stride):
        super().__init__()
        self.a = ConvBN(cin, cout, 3, stride)
        self.b = ConvBN(cout, cout, 3, 1)
        self.shortcut = ConvBN(cin, cout, 1, stride) if stride != 1 or cin != cout else None

    def forward(self, x):
        h = self.b(F.relu(self.a(x)))
        s = self.shortcut(x) if self.shortcut is not None else x
        return F.relu(h + s)


class CifarResNet(nn.Module):
    def __init__(self, depth, channels, classes, width):
        super().__init__()
        n = (depth - 2) // 6
        self.stem = ConvBN(channels, width, 3, 1)
        cin = width
        for s in range(3):
            w = width << s
            blocks = nn.ModuleDict()
            for k in range(n):
                blocks[f"block{k}"] = Basic(cin, w, 2 if s > 0 and k == 0 else 1)
                cin = w
            setattr(self, f"stage{s + 1}", blocks)
        self.fc = nn.Linear(cin, classes)

    def loss(self, x, y):
        h = F.relu(self.stem(x))
        for s in range(3):
            for block in getattr(self, f"stage{s + 1}").values():
                h = block(h)
        return F.cross_entropy(self.fc(h.mean(dim=(2, 3))), y.long())


def resnet_names(model):
    """mnemo name -> (tensor, trainable) for every parameter and running statistic."""
    out = {}
    for name, t in list(model.named_parameters()) + list(model.named_buffers()):
        if name.endswith("num_batches_tracked"):
            continue
        mn = name.replace(".", "/")
        mn = mn.replace("bn/weight", "bn/gamma").replace("bn/bias", "bn/beta")
        out[mn] = (t, isinstance(t, nn.Parameter))
    return out


def perturb_batch_norms(model):
    with torch.no_grad():  # non-trivial BN affine parameters and running statistics
        for m in model.modules():
            if isinstance(m, nn.BatchNorm2d):
                m.weight.uniform_(0.5, 1.5)
                m.bias.uniform_(-0.2, 0.2)
                m.running_mean.uniform_(-0.1, 0.1)
                m.running_var.uniform_(0.5, 1.5)


def make_resnet():
    model = CifarResNet(depth=8, channels=3, classes=5, width=4)
    perturb_batch_norms(model)
    data = torch.randn(4, 3, 8, 8)
    labels = torch.randint(0, 5, (4,), dtype=torch.int32)
    return model, resnet_names, data, labels


# ---- LSTM ----

class Lstm(nn.Module):
    def __init__(self, input, hidden, layers, classes):
        super().__init__()
        self.hidden = hidden
        self.layers = layers
        for l in range(layers):
            cell = nn.LSTMCell(input if l == 0 else hidden, hidden)
            with torch.no_grad():
                cell.bias_hh.zero_()
            cell.bias_hh.requires_grad_(False)  # mnemo has one bias per gate: b_ih + b_hh
            setattr(self, f"lstm{l}", cell)
        self.classifier = nn.Linear(hidden, classes)

    def loss(self, x, y):  # x [T,N,D], y [T,N]
        seq = list(x.unbind(0))
        for l in range(self.layers):
            cell = getattr(self, f"lstm{l}")
            h = c = x.new_zeros(x.shape[1], self.hidden)
            for t in range(len(seq)):
                h, c = cell(seq[t], (h, c))
                seq[t] = h
        losses = [F.cross_entropy(self.classifier(h), y[t].long()) for t, h in enumerate(seq)]
        return torch.stack(losses).mean()


def lstm_names(model):
    rename = {"weight_ih": "wx", "weight_hh": "wh", "bias_ih": "bias"}
    out = {}
    for name, t in model.named_parameters():
        module, field = name.rsplit(".", 1)
        if module.startswith("lstm"):
            if field == "bias_hh":
                continue
            field = rename[field]
        out[f"{module}/{field}"] = (t, True)
    return out


def make_lstm():
    model = Lstm(input=5, hidden=6, layers=2, classes=7)
    data = torch.randn(3, 4, 5)
    labels = torch.randint(0, 7, (3, 4), dtype=torch.int32)
    return model, lstm_names, data, labels


# ---- zoo models (models/zoo.cpp): a small DenseNet, one-block Inception-v3 networks ----

def torchvision_names(model):
    """mnemo name -> (tensor, trainable): torchvision's key with / for ., batch norm weight/bias -> gamma/beta."""
    bns = {n for n, m in model.named_modules() if isinstance(m, nn.BatchNorm2d)}
    out = {}
    for name, t in list(model.named_parameters()) + list(model.named_buffers()):
        if name.endswith("num_batches_tracked"):
            continue
        module, field = name.rsplit(".", 1)
        if module in bns:
            field = {"weight": "gamma", "bias": "beta"}.get(field, field)
        out[(module + "." + field).replace(".", "/")] = (t, isinstance(t, nn.Parameter))
    return out


class WithLoss(nn.Module):
    def __init__(self, net):
        super().__init__()
        self.net = net

    def loss(self, x, y):
        return F.cross_entropy(self.net(x), y.long())


def make_densenet():
    import torchvision
    net = torchvision.models.DenseNet(growth_rate=4, block_config=(2, 2), num_init_features=8, bn_size=2, num_classes=5)
    perturb_batch_norms(net)
    data = torch.randn(4, 3, 16, 16)
    labels = torch.randint(0, 5, (4,), dtype=torch.int32)
    return WithLoss(net), lambda m: torchvision_names(m.net), data, labels


class InceptionBlockNet(nn.Module):
    """models/zoo.cpp's build_inception_block_net: stem BasicConv2d 3x3, one block "Mixed", avg pool, fc."""
    def __init__(self, kind, width, c, classes):
        super().__init__()
        from torchvision.models.inception import BasicConv2d, InceptionA, InceptionB, InceptionC
        self.stem = BasicConv2d(3, width, kernel_size=3, padding=1)
        if kind == "A":
            self.Mixed, out = InceptionA(width, pool_features=c), 64 + 64 + 96 + c
        elif kind == "B":
            self.Mixed, out = InceptionB(width), 384 + 96 + width
        else:
            self.Mixed, out = InceptionC(width, channels_7x7=c), 4 * 192
        self.fc = nn.Linear(out, classes)

    def forward(self, x):
        return self.fc(torch.flatten(F.adaptive_avg_pool2d(self.Mixed(self.stem(x)), 1), 1))


def make_inception(kind):
    def make():
        net = InceptionBlockNet(kind, width=8, c=4, classes=5)
        perturb_batch_norms(net)
        data = torch.randn(3, 3, 9, 9)
        labels = torch.randint(0, 5, (3,), dtype=torch.int32)
        return WithLoss(net), lambda m: torchvision_names(m.net), data, labels
    return make


# ---- fixtures ----

def write_model(out, tag, make, meta, reference_dtype=torch.float32, seed=None):
    """The fixture files of one model. reference_dtype float64: PyTorch computes the expected values
    in float64 from the same float32 initial values and batch (saved as float32), so the reference
    carries no float32 rounding of its own (the zoo models: their first batch norm's weight gradient
    sums thousands of terms that nearly cancel, and PyTorch's float32 sum differs from the exact one
    by ~1e-4 of the tensor's largest value). seed: the model's own seed, so its files do not depend
    on which other fixtures are written in the same run (resnet and lstm use the run's global
    sequence, as when they were first written)."""
    if seed is not None:
        torch.manual_seed(seed)
    model, names_of, data, labels = make()
    init = {n: t.detach().clone().contiguous() for n, (t, _) in names_of(model).items()}
    save_file(init, os.path.join(out, f"{tag}_init.safetensors"), meta)
    save_file({"data": data.contiguous(), "labels": labels.contiguous()},
              os.path.join(out, f"{tag}_batch.safetensors"), meta)

    model = copy.deepcopy(model).to(reference_dtype)
    model.train()
    named = names_of(model)
    x = data.to(reference_dtype)
    opt = torch.optim.SGD([p for p in model.parameters() if p.requires_grad], **SGD)
    expected, losses = {}, []
    for step in range(STEPS):
        opt.zero_grad()
        loss = model.loss(x, labels)
        loss.backward()
        if step == 0:
            expected["loss"] = loss.detach().clone().reshape(()).float()
            for n, (t, trainable) in named.items():
                if trainable:
                    expected[f"grad/{n}"] = t.grad.detach().clone().contiguous().float()
        losses.append(loss.item())
        opt.step()
    expected["losses_10"] = torch.tensor(losses, dtype=torch.float64)
    for n, (t, trainable) in named.items():
        if not trainable:
            expected[f"running/{n}"] = t.detach().clone().contiguous().float()
    save_file(expected, os.path.join(out, f"{tag}_expected.safetensors"), meta)
    print(f"{tag}: {len(init)} tensors, loss {losses[0]:.6f} -> {losses[-1]:.6f} (reference in {reference_dtype})")


def write_compat(out):
    """Tensors the C++ test reads back from a file the Python package wrote (exact values)."""
    tensors = {
        "a_f32": torch.arange(6, dtype=torch.float32).reshape(2, 3) * 0.5 - 1.0,
        "b_f64_scalar": torch.tensor(3.25, dtype=torch.float64),
        "c_i32": torch.tensor([-2, -1, 7, 2147483647], dtype=torch.int32),
        "d_empty": torch.zeros(0, 3, dtype=torch.float32),
        "e_f64": torch.tensor([1e-300, -2.5, 1e300], dtype=torch.float64),
    }
    save_file(tensors, os.path.join(out, "compat_python.safetensors"),
              {"note": "written by the Python safetensors package"})


def main():
    root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--out", default=os.path.join(root, "tests", "fixtures"))
    ap.add_argument("--check", metavar="FILE", help="load FILE with the safetensors package and print it")
    ap.add_argument("--models", default="resnet,lstm,compat,densenet,inception_a,inception_b,inception_c",
                    help="which fixtures to write (comma-separated)")
    args = ap.parse_args()
    if args.check:
        for name, t in sorted(load_file(args.check).items()):
            print(name, t.dtype, list(t.shape), t.flatten()[:8].tolist())
        return
    torch.manual_seed(0)
    torch.set_num_threads(1)
    torch.use_deterministic_algorithms(True)
    os.makedirs(args.out, exist_ok=True)
    # One metadata key: the package writes a map in hash order, so several keys make the bytes vary.
    meta = "tools/make_fixtures.py, torch " + torch.__version__ + ": "
    models = set(args.models.split(","))
    if "resnet" in models:
        write_model(args.out, "resnet", make_resnet,
                    {"generator": meta + "resnet cifar depth 8, batch 4, 3x8x8, classes 5, width_base 4"})
    if "lstm" in models:
        write_model(args.out, "lstm", make_lstm,
                    {"generator": meta + "lstm steps 3, batch 4, input 5, hidden 6, layers 2, classes 7, per_step"})
    if "compat" in models:
        write_compat(args.out)
    if "densenet" in models:
        write_model(args.out, "densenet", make_densenet,
                    {"generator": meta + "torchvision DenseNet(growth 4, blocks (2,2), init 8, bn_size 2), batch 4, 3x16x16, "
                                         "classes 5; reference in float64"}, torch.float64, seed=11)
    for kind in "abc":
        if f"inception_{kind}" in models:
            write_model(args.out, f"inception_{kind}", make_inception(kind.upper()),
                        {"generator": meta + f"stem BasicConv2d(3, 8) + torchvision Inception{kind.upper()}(8, 4) + fc, batch 3, "
                                             f"3x9x9, classes 5; reference in float64"}, torch.float64, seed=12 + "abc".index(kind))


if __name__ == "__main__":
    main()
