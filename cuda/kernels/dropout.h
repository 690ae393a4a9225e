// Dropout kernel (cuda/kernels/dropout.cu), float32, on `stream`: y[i] = keep(i) ? x[i] * s : 0
// with the mask of cuda/kernels/dropout_math.h for (seed, *step, offset + i), s = 1 / (1 - p). The step is
// read from device memory (so a captured step replays with the current one). y may equal x.
#pragma once
#include <cuda_runtime_api.h>

#include <cstdint>

namespace mnemo::cuda {

void dropout_forward(cudaStream_t stream, const float* x, const int32_t* step, float* y, int64_t n, float p, float scale,
                     uint64_t seed, uint64_t offset);

}  // namespace mnemo::cuda
