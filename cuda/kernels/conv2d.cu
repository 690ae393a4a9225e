// conv2d_grad_bias (see conv2d.h): each channel's sum split over P = bn::split_parts(N, K, L)
// blocks of kThreads threads (batch_norm_math.h's partition: per-thread double partial sums over
// the part's contiguous range, a fixed-shape shared-memory tree), the block sums written to the
// workspace, then one thread per channel adds its P partials in order. Two launches, no atomics.
#include "cuda/kernels/batch_norm_math.h"
#include "cuda/kernels/common.cuh"
#include "cuda/kernels/conv2d.h"

namespace mnemo::cuda {
namespace {

static_assert((kThreads & (kThreads - 1)) == 0, "the reduction tree needs a power-of-two block");

// part[k * P + p] = sum of dy over part p of channel k (block b = k * P + p).
__global__ void bias_grad_parts_kernel(const float* dy, double* part, int64_t N, int64_t K, int64_t L, int64_t P) {
  __shared__ double sh[kThreads];
  const int tid = static_cast<int>(threadIdx.x);
  const int64_t M = N * L;
  for (int64_t b = blockIdx.x; b < K * P; b += gridDim.x) {
    sh[tid] = bn::partial_sum(dy, N, K, L, b / P, bn::part_range(M, P, b % P), tid, kThreads);
    __syncthreads();
    for (int stride = kThreads / 2; stride > 0; stride /= 2) {
      bn::tree_step(sh, tid, stride);
      __syncthreads();
    }
    if (tid == 0) part[b] = sh[0];
    __syncthreads();  // sh[0] is read before the next block index overwrites sh
  }
}

__global__ void bias_grad_combine_kernel(const double* part, float* db, int64_t K, int64_t P) {
  MNEMO_GRID_LOOP(k, K) { db[k] = static_cast<float>(bn::combine_parts(part + k * P, P)); }
}

}  // namespace

size_t conv2d_bias_grad_workspace_bytes(int64_t N, int64_t K, int64_t L) {
  if (K <= 0) return 0;
  return static_cast<size_t>(K * bn::split_parts(N, K, L)) * sizeof(double);
}

void conv2d_bias_grad(cudaStream_t stream, const float* dy, float* db, int64_t N, int64_t K, int64_t L,
                      void* workspace) {
  if (K <= 0) return;
  const int64_t P = bn::split_parts(N, K, L);
  double* part = static_cast<double*>(workspace);
  bias_grad_parts_kernel<<<static_cast<unsigned>(std::min<int64_t>(K * P, 1 << 20)), kThreads, 0, stream>>>(
      dy, part, N, K, L, P);
  MNEMO_CUDA_LAUNCHED();
  bias_grad_combine_kernel<<<blocks_for(K), kThreads, 0, stream>>>(part, db, K, P);
  MNEMO_CUDA_LAUNCHED();
}

}  // namespace mnemo::cuda
