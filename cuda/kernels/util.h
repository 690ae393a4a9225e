// Small utility kernels (cuda/kernels/util.cu): host-callable launchers, checked.
#pragma once
#include <cuda_runtime_api.h>

#include <cstdint>

namespace mnemo::cuda {

// x[i] = value for i in [0, n) on `stream` (tests poison outputs with NaN before a kernel runs).
void fill(cudaStream_t stream, float* x, int64_t n, float value);

}  // namespace mnemo::cuda
