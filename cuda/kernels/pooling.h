// Pooling kernels (cuda/kernels/pooling.cu), float32 NCHW, on `stream`. `planes` = N*C; the
// geometry (window, stride, padding, input and output plane sizes) is pool::Geom. Every output
// element is written; no atomics (backward gathers over the windows containing each input cell).
#pragma once
#include <cuda_runtime_api.h>

#include <cstdint>

#include "cuda/kernels/pooling_math.h"

namespace mnemo::cuda {

void max_pool_forward(cudaStream_t stream, const pool::Geom& g, const float* x, float* y, int64_t planes);
void max_pool_backward(cudaStream_t stream, const pool::Geom& g, const float* x, const float* y, const float* dy,
                       float* dx, int64_t planes);
void avg_pool_forward(cudaStream_t stream, const pool::Geom& g, const float* x, float* y, int64_t planes);
void avg_pool_backward(cudaStream_t stream, const pool::Geom& g, const float* dy, float* dx, int64_t planes);
// y[i] = mean of plane i of x (hw elements) for i < planes; dx = dy[i] / hw over plane i.
void global_avg_pool_forward(cudaStream_t stream, const float* x, float* y, int64_t planes, int64_t hw);
void global_avg_pool_backward(cudaStream_t stream, const float* dy, float* dx, int64_t planes, int64_t hw);

}  // namespace mnemo::cuda
