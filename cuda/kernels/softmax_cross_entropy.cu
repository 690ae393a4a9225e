// Softmax cross-entropy kernels (see softmax_cross_entropy.h). Row statistics (max m, sum of
// exp(z - m)) by one block per row: coalesced strided partials, then a fixed-shape shared-memory
// tree (deterministic; the sum's order differs from the CPU's serial loop, so results agree to
// rounding). The loss of a row is sce::row_loss_from (softmax_cross_entropy_math.h); the mean over
// rows is one thread's serial loop in row order. The gradient is the row pass into the workspace
// and then one thread per element. linear_cross_entropy's row pass (lce_rows) is the same two
// kernels over a chunk of its logits, in place, with a fixed scale instead of dloss / rows.
#include "cuda/kernels/common.cuh"
#include "cuda/kernels/softmax_cross_entropy.h"
#include "cuda/kernels/softmax_cross_entropy_math.h"

namespace mnemo::cuda {
namespace {

// stats[2n] = max of row n, stats[2n+1] = sum of exp(z - max); with `labels`, also
// row_losses[n] = the row's loss. One block per row (blocks loop over rows).
__global__ void row_stats_kernel(const float* z, const int32_t* labels, float* stats, float* row_losses, int64_t rows,
                                 int64_t cols) {
  __shared__ float sh[kThreads];
  const int tid = static_cast<int>(threadIdx.x);
  for (int64_t n = blockIdx.x; n < rows; n += gridDim.x) {
    const float* zn = z + n * cols;
    float m = zn[0];
    for (int64_t j = tid; j < cols; j += kThreads) m = (m < zn[j]) ? zn[j] : m;
    sh[tid] = m;
    __syncthreads();
    for (int stride = kThreads / 2; stride > 0; stride /= 2) {
      if (tid < stride) sh[tid] = (sh[tid] < sh[tid + stride]) ? sh[tid + stride] : sh[tid];
      __syncthreads();
    }
    m = sh[0];
    __syncthreads();
    float s = 0.0f;
    for (int64_t j = tid; j < cols; j += kThreads) s += expf(zn[j] - m);
    sh[tid] = s;
    __syncthreads();
    for (int stride = kThreads / 2; stride > 0; stride /= 2) {
      if (tid < stride) sh[tid] += sh[tid + stride];
      __syncthreads();
    }
    if (tid == 0) {
      s = sh[0];
      if (stats) stats[2 * n] = m, stats[2 * n + 1] = s;
      if (row_losses) row_losses[n] = sce::row_loss_from(zn, cols, labels[n], m, s);
    }
    __syncthreads();  // sh is rewritten for the next row
  }
}

unsigned row_blocks(int64_t rows) { return static_cast<unsigned>(std::min<int64_t>(rows, 1 << 20)); }

__global__ void mean_kernel(const float* row_losses, float* loss, int64_t rows) {
  if (blockIdx.x == 0 && threadIdx.x == 0) loss[0] = sce::mean_loss(row_losses, rows);
}

__global__ void grad_kernel(const float* z, const int32_t* labels, const float* dloss, const float* stats, float* dz,
                            int64_t rows, int64_t cols) {
  const float scale = sce::grad_scale(dloss[0], rows);
  MNEMO_GRID_LOOP(i, rows * cols) {
    const int64_t n = i / cols, j = i - n * cols;
    dz[i] = sce::grad_value(z[i], stats[2 * n], stats[2 * n + 1], labels[n], j, cols, scale);
  }
}

__global__ void scaled_grad_kernel(float* z, const int32_t* labels, const float* stats, float scale, int64_t rows,
                                   int64_t cols) {
  MNEMO_GRID_LOOP(i, rows * cols) {
    const int64_t n = i / cols, j = i - n * cols;
    z[i] = sce::grad_value(z[i], stats[2 * n], stats[2 * n + 1], labels[n], j, cols, scale);
  }
}

__global__ void scaled_total_kernel(const float* row_losses, float* loss, int64_t rows, float scale) {
  if (blockIdx.x == 0 && threadIdx.x == 0) loss[0] = sce::scaled_total(row_losses, rows, scale);
}

__global__ void scale_by_kernel(const float* x, const float* s, float* y, int64_t n) {
  const float f = s[0];
  MNEMO_GRID_LOOP(i, n) y[i] = x[i] * f;
}

}  // namespace

void lce_rows(cudaStream_t stream, float* z, const int32_t* labels, float* row_losses, float* stats, int64_t rows,
              int64_t cols, float scale) {
  MNEMO_CHECK(rows >= 1 && cols >= 1 && row_losses && stats)
      << "linear_cross_entropy: a chunk of [" << rows << "," << cols << "] logits needs row losses and statistics";
  row_stats_kernel<<<row_blocks(rows), kThreads, 0, stream>>>(z, labels, stats, row_losses, rows, cols);
  MNEMO_CUDA_LAUNCHED();
  scaled_grad_kernel<<<blocks_for(rows * cols), kThreads, 0, stream>>>(z, labels, stats, scale, rows, cols);
  MNEMO_CUDA_LAUNCHED();
}

void lce_total(cudaStream_t stream, const float* row_losses, float* loss, int64_t rows, float scale) {
  scaled_total_kernel<<<1, 1, 0, stream>>>(row_losses, loss, rows, scale);
  MNEMO_CUDA_LAUNCHED();
}

void scale_by(cudaStream_t stream, const float* x, const float* s, float* y, int64_t n) {
  if (n <= 0) return;
  scale_by_kernel<<<blocks_for(n), kThreads, 0, stream>>>(x, s, y, n);
  MNEMO_CUDA_LAUNCHED();
}

void sce_loss(cudaStream_t stream, const float* z, const int32_t* labels, float* loss, int64_t rows, int64_t cols,
              float* workspace) {
  MNEMO_CHECK(rows >= 1 && cols >= 1) << "softmax_cross_entropy: logits must be [N>=1, C>=1], got [" << rows << ","
                                      << cols << "]";
  MNEMO_CHECK(workspace) << "softmax_cross_entropy: no workspace for " << rows << " row losses";
  row_stats_kernel<<<row_blocks(rows), kThreads, 0, stream>>>(z, labels, nullptr, workspace, rows, cols);
  MNEMO_CUDA_LAUNCHED();
  mean_kernel<<<1, 1, 0, stream>>>(workspace, loss, rows);
  MNEMO_CUDA_LAUNCHED();
}

void sce_grad(cudaStream_t stream, const float* z, const int32_t* labels, const float* dloss, float* dz, int64_t rows,
              int64_t cols, float* workspace) {
  MNEMO_CHECK(rows >= 1 && cols >= 1) << "softmax_cross_entropy_grad: logits must be [N>=1, C>=1], got [" << rows
                                      << "," << cols << "]";
  MNEMO_CHECK(workspace) << "softmax_cross_entropy_grad: no workspace for " << rows << " row statistics";
  row_stats_kernel<<<row_blocks(rows), kThreads, 0, stream>>>(z, labels, workspace, nullptr, rows, cols);
  MNEMO_CUDA_LAUNCHED();
  grad_kernel<<<blocks_for(rows * cols), kThreads, 0, stream>>>(z, labels, dloss, workspace, dz, rows, cols);
  MNEMO_CUDA_LAUNCHED();
}

}  // namespace mnemo::cuda
