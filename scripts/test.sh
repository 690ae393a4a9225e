#!/usr/bin/env bash
# Builds mnemo and runs the whole test suite (ctest). GPU tests skip cleanly without a GPU.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/build.sh
build=${MNEMO_BUILD_DIR:-build}
ctest --test-dir "$build" --output-on-failure -j"$(nproc)"
