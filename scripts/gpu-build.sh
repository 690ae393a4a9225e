#!/usr/bin/env bash
# Builds the GPU bundle HERE (a machine with nvcc + cuDNN, no GPU needed) for a GPU machine that has
# no compiler packages, no Eigen and no apt (docs/GPU.md): a Release build for sm_90 (H100/H200) in
# build-gpu/, then gpu-dist/ = the binaries + the Debian libraries they need (oneDNN, yaml-cpp,
# OpenMP, ...), stripped, and gpu-dist.tar.xz (the same, compressed). cuDNN and cuBLAS are NOT bundled (nor NCCL, which mnemo loads only for
# data parallelism): the GPU machine has them (Python
# wheels; scripts/gpu-run.sh finds them). Generic x86-64-v3 code (AVX2), not -march=native: the GPU
# machine's CPU is not this one. Carry gpu-dist.tar.xz (the device tool carries 64 MiB at most; the
# folder itself is ~80 MB with the MILP solver's and ONNX's libraries).
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/deps.sh
cmake -S . -B build-gpu -G Ninja -DCMAKE_BUILD_TYPE=Release -DMNEMO_NATIVE=OFF -DCMAKE_CXX_FLAGS=-march=x86-64-v3 \
  -DCMAKE_CUDA_ARCHITECTURES=90 -DMNEMO_BUILD_BENCH=OFF -DMNEMO_MKL_ROOT= >/dev/null
ninja -C build-gpu -j"$(nproc)" mnemo mnemo_gpu_tests
rm -rf gpu-dist
mkdir -p gpu-dist/bin gpu-dist/lib
cp build-gpu/mnemo build-gpu/tests/mnemo_gpu_tests gpu-dist/bin/
strip gpu-dist/bin/*
# Every shared library the binaries load except glibc's own, the driver and the CUDA libraries the
# GPU machine provides.
for bin in gpu-dist/bin/*; do
  ldd "$bin" | awk '/=> \// {print $3}'
done | sort -u | grep -v -E '/(libc|libm|libdl|libpthread|librt|ld-linux[^/]*|libcuda|libcudnn[^/]*|libcublas[^/]*|libcublasLt)\.so' |
  while read -r lib; do cp -L "$lib" gpu-dist/lib/; done
strip --strip-unneeded gpu-dist/lib/*.so* 2>/dev/null || true
ls gpu-dist/lib
du -sh gpu-dist
# The device tool carries at most 64 MiB: the bundle also goes as one xz archive (about a quarter of
# the size; scripts/gpu-run.sh unpacks it when gpu-dist/ did not come). Carry gpu-dist.tar.xz.
tar -cf - gpu-dist | xz -T"$(nproc)" -6 >gpu-dist.tar.xz
du -sh gpu-dist.tar.xz
