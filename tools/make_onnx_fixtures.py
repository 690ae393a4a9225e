#!/usr/bin/env python3
"""ONNX fixtures for mnemo's importer tests (tests/onnx_test.cpp reads them; the C++ tests need no Python).

Regenerate with PyTorch, torchvision, onnx and safetensors installed (no GPU needed):

    /work/venv-torch/bin/python tools/make_onnx_fixtures.py            # writes tests/fixtures/onnx/
    /work/venv-torch/bin/python tools/make_onnx_fixtures.py --out DIR

Writes, with the TorchScript exporter (dynamo=False) at opset 17 (the newest Debian's libonnx 1.12
knows), without constant folding (which would fold batch norms into convolutions):
    <model>_structure.onnx   structure-only exports (export_params=False: the parameters are graph
                             inputs without data; a few kilobytes) of torchvision's resnet18,
                             mobilenet_v2, densenet121 and inception_v3 (aux_logits off) at batch 2,
                             224x224 (299x299 for Inception-v3), in eval mode
    small.onnx               a small network with its weights: conv-BN-ReLU, max pool, two branches
                             (1x1 conv; 3x3 conv with bias) concatenated, ReLU6, a 1x1 conv with 2
                             groups, average pool, flatten, linear layer; batch 4, 3x8x8, 5 classes
    small_batch.safetensors  "data" [4,3,8,8] float32 and "labels" [4] int32
    small_expected.safetensors  "loss" (mean cross-entropy in training mode: batch-norm statistics
                             of the batch) and "grad/<mnemo name>" for every parameter, where the
                             mnemo name is the ONNX initializer name with "/" for "."
"""
import argparse
import os
import sys


def main():
    here = os.path.dirname(os.path.abspath(__file__))
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--out", default=os.path.join(here, "..", "tests", "fixtures", "onnx"))
    a = p.parse_args()
    import torch
    import torchvision
    from safetensors.torch import save_file

    os.makedirs(a.out, exist_ok=True)
    torch.manual_seed(0)

    def export(model, x, path, params):
        torch.onnx.export(model, (x,), path, dynamo=False, opset_version=17, export_params=params,
                          input_names=["input"], output_names=["logits"], do_constant_folding=False,
                          training=torch.onnx.TrainingMode.EVAL)
        print(f"{os.path.basename(path):32s} {os.path.getsize(path):>8d} bytes", file=sys.stderr)

    for name, fn, kwargs, size in [("resnet18", "resnet18", {}, 224), ("mobilenet_v2", "mobilenet_v2", {}, 224),
                                   ("densenet121", "densenet121", {}, 224),
                                   ("inception_v3", "inception_v3", {"aux_logits": False, "init_weights": False}, 299)]:
        model = getattr(torchvision.models, fn)(weights=None, **kwargs).eval()
        export(model, torch.randn(2, 3, size, size), os.path.join(a.out, f"{name}_structure.onnx"), False)

    class Small(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.conv1 = torch.nn.Conv2d(3, 6, 3, padding=1, bias=False)
            self.bn1 = torch.nn.BatchNorm2d(6)
            self.branch_a = torch.nn.Conv2d(6, 4, 1, bias=False)
            self.branch_b = torch.nn.Conv2d(6, 4, 3, padding=1)
            self.mix = torch.nn.Conv2d(8, 8, 1, groups=2, bias=False)
            self.fc = torch.nn.Linear(8 * 2 * 2, 5)

        def forward(self, x):
            h = torch.relu(self.bn1(self.conv1(x)))
            h = torch.nn.functional.max_pool2d(h, 2)
            h = torch.cat([self.branch_a(h), self.branch_b(h)], 1)
            h = torch.nn.functional.relu6(h)
            h = torch.nn.functional.avg_pool2d(self.mix(h), 2)
            return self.fc(torch.flatten(h, 1))

    model = Small()
    with torch.no_grad():  # running statistics away from their defaults, so a mix-up would show
        model.bn1.running_mean.uniform_(-0.5, 0.5)
        model.bn1.running_var.uniform_(0.5, 1.5)
        model.bn1.weight.uniform_(0.5, 1.5)
        model.bn1.bias.uniform_(-0.5, 0.5)
    x = torch.randn(4, 3, 8, 8)
    y = torch.tensor([0, 3, 1, 4], dtype=torch.int32)
    export(model.eval(), x, os.path.join(a.out, "small.onnx"), True)
    model.train()
    loss = torch.nn.functional.cross_entropy(model(x), y.long())
    loss.backward()
    expected = {"loss": loss.detach().reshape(())}
    for n, prm in model.named_parameters():
        expected["grad/" + n.replace(".", "/")] = prm.grad.detach().contiguous()
    save_file({"data": x.contiguous(), "labels": y}, os.path.join(a.out, "small_batch.safetensors"))
    save_file(expected, os.path.join(a.out, "small_expected.safetensors"))
    print(f"small: loss {loss.item():.6f}, {len(expected) - 1} gradients", file=sys.stderr)


if __name__ == "__main__":
    main()
