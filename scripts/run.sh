#!/usr/bin/env bash
# Builds mnemo and runs the main job: ResNet-20 trained on Fashion-MNIST (Debian's
# dataset-fashion-mnist), printing progress, the test accuracy and the memory report of the
# config's memory mode. Extra arguments go to `mnemo train` (e.g. --memory sublinear, --steps 200).
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/build.sh >/dev/null
build=${MNEMO_BUILD_DIR:-build}
"$build/mnemo" train configs/resnet20-fashion-mnist.yaml "$@"
