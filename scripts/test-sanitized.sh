#!/usr/bin/env bash
# Builds mnemo with AddressSanitizer and UndefinedBehaviorSanitizer into ${MNEMO_ASAN_DIR:-build-asan}
# and runs the whole CPU test suite there; any sanitizer report fails the run (halt_on_error).
# The CUDA backend is left out (nvcc's host code and the sanitizers do not mix); the GPU tests
# need a GPU anyway. Takes ~30 minutes on 2 cores.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/deps.sh
build=${MNEMO_ASAN_DIR:-build-asan}
flags="-fsanitize=address,undefined -fno-omit-frame-pointer -fno-sanitize-recover=undefined"
# Debug (plan validation on in the executor) at -O1: a sanitized -O2 build takes ~45 minutes here.
cmake -S . -B "$build" -G Ninja -DCMAKE_BUILD_TYPE=Debug -DCMAKE_CXX_FLAGS_DEBUG="-O1 -g1" -DMNEMO_CUDA=OFF \
  -DMNEMO_BUILD_BENCH=OFF -DMNEMO_JEMALLOC=OFF -DMNEMO_MKL_ROOT= -DCMAKE_CXX_FLAGS="$flags" -DCMAKE_EXE_LINKER_FLAGS="-fsanitize=address,undefined" >/dev/null
ninja -C "$build" -j"$(nproc)"
# OpenMP's runtime keeps thread stacks alive at exit: leak reports there are not ours.
export ASAN_OPTIONS="halt_on_error=1:abort_on_error=0:detect_leaks=1:${ASAN_OPTIONS:-}"
export UBSAN_OPTIONS="halt_on_error=1:print_stacktrace=1:${UBSAN_OPTIONS:-}"
export LSAN_OPTIONS="suppressions=$PWD/scripts/lsan.supp:${LSAN_OPTIONS:-}"
ctest --test-dir "$build" -L cpu -E '^fuzz_inputs$' --output-on-failure -j"$(nproc)" --timeout 900
# The bad-input fuzzer against the sanitized binary (no address-space limit: ASan's shadow memory).
python3 tools/fuzz_inputs.py --mnemo "$build/mnemo" --memory-gb 0 --seed 3 --configs 1000 --checkpoints 200 --data 16 \
  --cli 60 --kills 4 --timeout 120
