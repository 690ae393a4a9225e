#!/usr/bin/env bash
# Builds mnemo and runs the main job: a small conv net trained on synthetic data, printing the loss
# and the memory figures. Extra arguments go to `mnemo demo` (e.g. --steps 50).
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/build.sh >/dev/null
build=${MNEMO_BUILD_DIR:-build}
"$build/mnemo" demo "$@"
