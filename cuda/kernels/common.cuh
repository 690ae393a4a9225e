// Shared pieces of mnemo's own CUDA kernels (device code, nvcc, C++17).
//   Launch shape: 256 threads per block, grid-stride loops, grid capped so every launch is legal.
//   Determinism: no atomics anywhere; every reduction has a fixed order (per-thread serial loops
//   and fixed-shape shared-memory trees), so a kernel gives the same bits on every run.
#pragma once
#include <cuda_runtime.h>

#include <algorithm>
#include <cstdint>

#include "cuda/check.h"

namespace mnemo::cuda {

constexpr int kThreads = 256;

inline unsigned blocks_for(int64_t n) {
  return static_cast<unsigned>(std::max<int64_t>(1, std::min<int64_t>((n + kThreads - 1) / kThreads, 1 << 20)));
}

}  // namespace mnemo::cuda

// for (i in [0, n)) over all threads of the grid.
#define MNEMO_GRID_LOOP(i, n)                                                                   \
  for (int64_t i = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < (n);         \
       i += static_cast<int64_t>(blockDim.x) * gridDim.x)
