// The optimiser kernels (cuda/kernels/optimizer.cu), float32; see ops/optimizer.cpp for the ops.
//   sgd_update: status_out = status_in, or `index` when status_in is 0 and g, v' or w' holds a NaN
//     or Inf (checked in a first kernel, written in a second);
//     then, if status_out is 0: v' = momentum * v + (g + weight_decay * w); w' = w - lr * v'
//     (lr read from device memory, so a captured step replays with the current one).
//     In place allowed (w_out may equal w, v_out v, status_out status_in).
//   finite_check: status = 0 when every x is finite, else -1.
//   assign_if_ok: the BatchNorm running statistics of a step whose status is 0.
// No atomics: every thread that finds a non-finite value stores the same word.
#pragma once
#include <cuda_runtime_api.h>

#include <cstdint>

namespace mnemo::cuda {

void sgd_update(cudaStream_t stream, const float* w, const float* g, const float* v, const float* lr, const int32_t* status_in,
                float* w_out, float* v_out, int32_t* status_out, int64_t n, float momentum, float weight_decay, int32_t index);
void finite_check(cudaStream_t stream, const float* x, int64_t n, int32_t* status);
// dst = value (`bytes`, a multiple of 4) when *status is 0; else nothing.
void assign_if_ok(cudaStream_t stream, const void* value, void* dst, int64_t bytes, const int32_t* status);

}  // namespace mnemo::cuda
