#!/usr/bin/env python3
"""Reference figures of torchvision's classifiers for mnemo's zoo builders (models/zoo.cpp).

Writes tests/fixtures/zoo_reference.json, which tests/zoo_test.cpp reads (the C++ tests need no
Python). Regenerate with PyTorch and torchvision installed (any machine; no GPU needed):

    python3 tools/zoo_reference.py                 # writes tests/fixtures/zoo_reference.json
    python3 tools/zoo_reference.py --out FILE

Per model (mnemo's config name -> torchvision constructor, weights=None):
    params         sum of numel over model.parameters() (trainable parameters; batch-norm running
                   statistics are buffers and not counted)
    forward_flops  FLOPs of one forward pass at batch 1 and the model's standard input size, in
                   eval mode, counted by torch.utils.flop_counter.FlopCounterMode (convolutions and
                   matrix products, 2 per multiply-add; pooling, batch norm and activations are not
                   counted)
    input          [C, H, W] of that input
    state          (for a few models) every state-dict entry but num_batches_tracked: name -> shape
"""
import argparse
import json
import os
import sys

MODELS = {
    # name: (torchvision function, kwargs, input [C,H,W], with state dict)
    "alexnet": ("alexnet", {}, [3, 224, 224], True),
    "vgg11": ("vgg11", {}, [3, 224, 224], False),
    "vgg11_bn": ("vgg11_bn", {}, [3, 224, 224], True),
    "vgg13": ("vgg13", {}, [3, 224, 224], False),
    "vgg13_bn": ("vgg13_bn", {}, [3, 224, 224], False),
    "vgg16": ("vgg16", {}, [3, 224, 224], False),
    "vgg16_bn": ("vgg16_bn", {}, [3, 224, 224], False),
    "vgg19": ("vgg19", {}, [3, 224, 224], False),
    "vgg19_bn": ("vgg19_bn", {}, [3, 224, 224], False),
    "densenet121": ("densenet121", {}, [3, 224, 224], True),
    "densenet161": ("densenet161", {}, [3, 224, 224], False),
    "densenet169": ("densenet169", {}, [3, 224, 224], False),
    "densenet201": ("densenet201", {}, [3, 224, 224], False),
    "inception_v3": ("inception_v3", {"aux_logits": False, "init_weights": False}, [3, 299, 299], True),
    "inception_v3_aux": ("inception_v3", {"aux_logits": True, "init_weights": False}, [3, 299, 299], True),
    "mobilenet_v2": ("mobilenet_v2", {}, [3, 224, 224], True),
    # mnemo's ResNet builder (models/resnet.cpp; its own parameter names)
    "resnet18": ("resnet18", {}, [3, 224, 224], False),
    "resnet34": ("resnet34", {}, [3, 224, 224], False),
    "resnet50": ("resnet50", {}, [3, 224, 224], False),
    "resnet101": ("resnet101", {}, [3, 224, 224], False),
    "resnet152": ("resnet152", {}, [3, 224, 224], False),
}


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    here = os.path.dirname(os.path.abspath(__file__))
    p.add_argument("--out", default=os.path.join(here, "..", "tests", "fixtures", "zoo_reference.json"))
    a = p.parse_args()
    import torch
    import torchvision
    from torch.utils.flop_counter import FlopCounterMode

    torch.manual_seed(0)
    out = {"torch": torch.__version__, "torchvision": torchvision.__version__, "models": {}}
    for name, (fn, kwargs, shape, with_state) in MODELS.items():
        model = getattr(torchvision.models, fn)(weights=None, **kwargs).eval()
        entry = {"params": sum(t.numel() for t in model.parameters()), "input": shape}
        counter = FlopCounterMode(display=False)
        with torch.no_grad(), counter:
            model(torch.randn(1, *shape))
        entry["forward_flops"] = counter.get_total_flops()
        if with_state:
            entry["state"] = {k: list(v.shape) for k, v in model.state_dict().items()
                              if not k.endswith("num_batches_tracked")}
        out["models"][name] = entry
        print(f"{name:18s} params {entry['params']:>11,d}  forward GFLOPs {entry['forward_flops'] / 1e9:8.3f}",
              file=sys.stderr)
    with open(a.out, "w") as f:
        json.dump(out, f, indent=1, sort_keys=True)
        f.write("\n")
    print(f"wrote {a.out} ({os.path.getsize(a.out)} bytes)", file=sys.stderr)


if __name__ == "__main__":
    main()
