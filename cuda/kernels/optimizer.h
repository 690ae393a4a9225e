// The optimiser kernels (cuda/kernels/optimizer.cu), float32; see ops/optimizer.cpp for the ops.
//   sgd_update: status_out = status_in, or `index` when status_in is 0 and g holds a NaN or Inf;
//     then, if status_out is 0: v' = momentum * v + (g + weight_decay * w); w' = w - lr * v'
//     (lr read from device memory, so a captured step replays with the current one).
//     In place allowed (w_out may equal w, v_out v, status_out status_in).
//   finite_check: status = 0 when every x is finite, else -1.
// No atomics: every thread that finds a non-finite value stores the same word.
#pragma once
#include <cuda_runtime_api.h>

#include <cstdint>

namespace mnemo::cuda {

void sgd_update(cudaStream_t stream, const float* w, const float* g, const float* v, const float* lr, const int32_t* status_in,
                float* w_out, float* v_out, int32_t* status_out, int64_t n, float momentum, float weight_decay, int32_t index);
void finite_check(cudaStream_t stream, const float* x, int64_t n, int32_t* status);

}  // namespace mnemo::cuda
