// Own kernel of the conv2d family (cuda/kernels/conv2d.cu); the convolutions themselves run
// through cuDNN from cuda/ops_conv2d.cpp.
#pragma once
#include <cuda_runtime_api.h>

#include <cstdint>

namespace mnemo::cuda {

// conv2d_grad_bias: db[k] = sum over n, l of dy[n, k, l] (dy viewed as [N, K, L], L = P*Q),
// accumulated in double in a fixed order (one block per channel, as batch_norm_math.h), then
// rounded to float. Bitwise reproducible.
void conv2d_bias_grad(cudaStream_t stream, const float* dy, float* db, int64_t N, int64_t K, int64_t L);

}  // namespace mnemo::cuda
