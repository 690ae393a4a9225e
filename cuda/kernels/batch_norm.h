// Batch-norm CUDA kernels (cuda/kernels/batch_norm.cu): host-callable launchers, float32, checked.
// x is viewed as [N, C, L] (L = H*W, or 1 for x[N,C]); every per-channel vector has C entries.
// Each channel's reductions are split over P = bn::split_parts(N, C, L) blocks of 256 threads with
// the fixed-order double reductions of cuda/kernels/batch_norm_math.h, the P block partials added
// in order by one thread per channel, then an elementwise pass over all elements; results are
// bitwise reproducible; no atomics. The scratch memory (block partials, per-channel coefficients)
// is the op's planned workspace: `workspace` must hold batch_norm_workspace_bytes(...) bytes
// (8-byte aligned).
#pragma once
#include <cuda_runtime_api.h>

#include <cstddef>
#include <cstdint>

namespace mnemo::cuda {

// Workspace bytes of the launchers below: reductions = true for batch_norm_train_forward and both
// backwards (per-channel coefficients + 2 * C * P doubles of partials), false for
// batch_norm_inference_forward (the coefficients only: 4 * C floats). 0 for C <= 0.
size_t batch_norm_workspace_bytes(int64_t N, int64_t C, int64_t L, bool reductions);

// training=true: mean, inv_std (biased variance) of each channel, y = gamma (x - mean) inv_std + beta.
void batch_norm_train_forward(cudaStream_t stream, const float* x, const float* gamma, const float* beta, float* y,
                              float* mean, float* inv_std, int64_t N, int64_t C, int64_t L, double eps,
                              void* workspace);
// training=false: y = gamma (x - running_mean) / sqrt(max(running_var, 0) + eps) + beta.
void batch_norm_inference_forward(cudaStream_t stream, const float* x, const float* gamma, const float* beta,
                                  const float* running_mean, const float* running_var, float* y, int64_t N,
                                  int64_t C, int64_t L, double eps, void* workspace);
// batch_norm_recompute: the training forward's y from its saved mean and inv_std (bitwise
// batch_norm_train_forward's: the same coefficients and elementwise pass). Workspace:
// batch_norm_workspace_bytes(N, C, L, false).
void batch_norm_recompute(cudaStream_t stream, const float* x, const float* gamma, const float* beta, const float* mean,
                          const float* inv_std, float* y, int64_t N, int64_t C, int64_t L, void* workspace);
// batch_norm_grad: (dx, dgamma, dbeta) from (x, gamma, mean, inv_std, dy).
void batch_norm_backward(cudaStream_t stream, const float* x, const float* gamma, const float* mean,
                         const float* inv_std, const float* dy, float* dx, float* dgamma, float* dbeta, int64_t N,
                         int64_t C, int64_t L, void* workspace);
// batch_norm_inference_grad: (dx, dgamma, dbeta) from (x, gamma, running_mean, running_var, dy).
void batch_norm_inference_backward(cudaStream_t stream, const float* x, const float* gamma, const float* running_mean,
                                   const float* running_var, const float* dy, float* dx, float* dgamma, float* dbeta,
                                   int64_t N, int64_t C, int64_t L, double eps, void* workspace);
// batch_norm_stats over C channels; new_mean may equal running_mean and new_var running_var.
void batch_norm_stats(cudaStream_t stream, const float* running_mean, const float* running_var, const float* mean,
                      const float* inv_std, float* new_mean, float* new_var, int64_t C, double momentum, double eps,
                      int64_t count);

}  // namespace mnemo::cuda
