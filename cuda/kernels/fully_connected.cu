// fully_connected bias kernels (see fully_connected.h). Deterministic: no atomics; the bias
// gradient sums each column serially in row order.
#include "cuda/kernels/common.cuh"
#include "cuda/kernels/fully_connected.h"

namespace mnemo::cuda {
namespace {

__global__ void bias_add_kernel(float* y, const float* b, int64_t total, int64_t M) {
  MNEMO_GRID_LOOP(i, total) y[i] += b[i % M];
}

__global__ void bias_grad_kernel(const float* dy, float* db, int64_t N, int64_t M, bool accumulate) {
  MNEMO_GRID_LOOP(j, M) {
    float s = accumulate ? db[j] : 0.0f;
    for (int64_t n = 0; n < N; ++n) s += dy[n * M + j];
    db[j] = s;
  }
}

}  // namespace

void fc_bias_add(cudaStream_t stream, float* y, const float* b, int64_t N, int64_t M) {
  const int64_t total = N * M;
  if (total <= 0) return;
  bias_add_kernel<<<blocks_for(total), kThreads, 0, stream>>>(y, b, total, M);
  MNEMO_CUDA_LAUNCHED();
}

void fc_bias_grad(cudaStream_t stream, const float* dy, float* db, int64_t N, int64_t M, bool accumulate) {
  if (M <= 0) return;
  bias_grad_kernel<<<blocks_for(M), kThreads, 0, stream>>>(dy, db, N, M, accumulate);
  MNEMO_CUDA_LAUNCHED();
}

}  // namespace mnemo::cuda
