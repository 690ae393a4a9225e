#!/usr/bin/env bash
# Configures and builds mnemo (Release) into ${MNEMO_BUILD_DIR:-build}.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/deps.sh
build=${MNEMO_BUILD_DIR:-build}
cmake -S . -B "$build" -G Ninja -DCMAKE_BUILD_TYPE=Release "$@" >/dev/null
ninja -C "$build" -j"$(nproc)"
