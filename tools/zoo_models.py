"""OLLA's six zoo CNNs as both frameworks build them, shared by tools/olla_table.py (mnemo's plans) and
tools/zoo_gpu_peaks.py (mnemo and PyTorch on a GPU): name -> (mnemo's model section, input shape,
torchvision constructor keyword arguments), and the training config mnemo runs them with."""

MODELS = {
    "alexnet": ("{type: alexnet}", [3, 224, 224], {}),
    "vgg16": ("{type: vgg, depth: 16}", [3, 224, 224], {}),
    "resnet50": ("{type: resnet, style: imagenet, depth: 50, layout: plain}", [3, 224, 224], {}),
    "inception_v3": ("{type: inception_v3}", [3, 299, 299], {"aux_logits": False, "init_weights": False}),
    "mobilenet_v2": ("{type: mobilenet_v2}", [3, 224, 224], {}),
    "densenet121": ("{type: densenet, depth: 121}", [3, 224, 224], {}),
}


def write_config(path, name, batch):
    """A one-step training config of zoo model `name` at `batch` (synthetic data, SGD with momentum)."""
    model, shape, _ = MODELS[name]
    with open(path, "w") as f:
        f.write(f"model: {model}\ndata: {{source: synthetic, shape: {shape}, classes: 1000, batch: {batch}, size: 64}}\n"
                "optimizer: {lr: 0.01, momentum: 0.9, weight_decay: 0.0001}\ntrain: {steps: 1}\n")
