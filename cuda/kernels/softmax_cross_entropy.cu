// Softmax cross-entropy kernels (see softmax_cross_entropy.h). One thread per row runs the CPU op's
// serial row loops (softmax_cross_entropy_math.h); the mean over rows is one thread's serial loop in
// row order (fixed order, no atomics). The gradient is a row pass (max, sum into the workspace) and
// then one thread per element.
#include "cuda/kernels/common.cuh"
#include "cuda/kernels/softmax_cross_entropy.h"
#include "cuda/kernels/softmax_cross_entropy_math.h"

namespace mnemo::cuda {
namespace {

__global__ void row_loss_kernel(const float* z, const int32_t* labels, float* row_losses, int64_t rows,
                                int64_t cols) {
  MNEMO_GRID_LOOP(n, rows) row_losses[n] = sce::row_loss(z + n * cols, cols, labels[n]);
}

__global__ void mean_kernel(const float* row_losses, float* loss, int64_t rows) {
  if (blockIdx.x == 0 && threadIdx.x == 0) loss[0] = sce::mean_loss(row_losses, rows);
}

__global__ void row_stats_kernel(const float* z, float* stats, int64_t rows, int64_t cols) {
  MNEMO_GRID_LOOP(n, rows) {
    float m, s;
    sce::row_max_sum(z + n * cols, cols, m, s);
    stats[2 * n] = m;
    stats[2 * n + 1] = s;
  }
}

__global__ void grad_kernel(const float* z, const int32_t* labels, const float* dloss, const float* stats, float* dz,
                            int64_t rows, int64_t cols) {
  const float scale = sce::grad_scale(dloss[0], rows);
  MNEMO_GRID_LOOP(i, rows * cols) {
    const int64_t n = i / cols, j = i - n * cols;
    dz[i] = sce::grad_value(z[i], stats[2 * n], stats[2 * n + 1], labels[n], j, cols, scale);
  }
}

}  // namespace

void sce_loss(cudaStream_t stream, const float* z, const int32_t* labels, float* loss, int64_t rows, int64_t cols,
              float* workspace) {
  MNEMO_CHECK(rows >= 1 && cols >= 1) << "softmax_cross_entropy: logits must be [N>=1, C>=1], got [" << rows << ","
                                      << cols << "]";
  MNEMO_CHECK(workspace) << "softmax_cross_entropy: no workspace for " << rows << " row losses";
  row_loss_kernel<<<blocks_for(rows), kThreads, 0, stream>>>(z, labels, workspace, rows, cols);
  MNEMO_CUDA_LAUNCHED();
  mean_kernel<<<1, 1, 0, stream>>>(workspace, loss, rows);
  MNEMO_CUDA_LAUNCHED();
}

void sce_grad(cudaStream_t stream, const float* z, const int32_t* labels, const float* dloss, float* dz, int64_t rows,
              int64_t cols, float* workspace) {
  MNEMO_CHECK(rows >= 1 && cols >= 1) << "softmax_cross_entropy_grad: logits must be [N>=1, C>=1], got [" << rows
                                      << "," << cols << "]";
  MNEMO_CHECK(workspace) << "softmax_cross_entropy_grad: no workspace for " << rows << " row statistics";
  row_stats_kernel<<<blocks_for(rows), kThreads, 0, stream>>>(z, workspace, rows, cols);
  MNEMO_CUDA_LAUNCHED();
  grad_kernel<<<blocks_for(rows * cols), kThreads, 0, stream>>>(z, labels, dloss, workspace, dz, rows, cols);
  MNEMO_CUDA_LAUNCHED();
}

}  // namespace mnemo::cuda
