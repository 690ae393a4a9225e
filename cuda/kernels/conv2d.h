// Own kernel of the conv2d family (cuda/kernels/conv2d.cu); the convolutions themselves run
// through cuDNN from cuda/ops_conv2d.cpp.
#pragma once
#include <cuda_runtime_api.h>

#include <cstddef>
#include <cstdint>

namespace mnemo::cuda {

// conv2d_grad_bias: db[k] = sum over n, l of dy[n, k, l] (dy viewed as [N, K, L], L = P*Q),
// accumulated in double in a fixed order (each channel split over bn::split_parts(N, K, L) blocks,
// the block partials added in order; batch_norm_math.h), then rounded to float. Bitwise
// reproducible. `workspace` holds conv2d_bias_grad_workspace_bytes(N, K, L) bytes (8-byte aligned).
size_t conv2d_bias_grad_workspace_bytes(int64_t N, int64_t K, int64_t L);
void conv2d_bias_grad(cudaStream_t stream, const float* dy, float* db, int64_t N, int64_t K, int64_t L,
                      void* workspace);

}  // namespace mnemo::cuda
