// The SGD update (cuda/kernels/optimizer.cu), float32, in place allowed (w_out may equal w, v_out
// may equal v): v' = momentum * v + (g + weight_decay * w);  w' = w - lr * v'.
#pragma once
#include <cuda_runtime_api.h>

#include <cstdint>

namespace mnemo::cuda {

void sgd_update(cudaStream_t stream, const float* w, const float* g, const float* v, float* w_out, float* v_out,
                int64_t n, float lr, float momentum, float weight_decay);

}  // namespace mnemo::cuda
