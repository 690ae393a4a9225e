// conv2d_grad_bias (see conv2d.h): one block of kThreads threads per channel, per-thread double
// partial sums in batch_norm_math.h's fixed order, a fixed-shape shared-memory tree.
#include "cuda/kernels/batch_norm_math.h"
#include "cuda/kernels/common.cuh"
#include "cuda/kernels/conv2d.h"

namespace mnemo::cuda {
namespace {

static_assert((kThreads & (kThreads - 1)) == 0, "the reduction tree needs a power-of-two block");

__global__ void bias_grad_kernel(const float* dy, float* db, int64_t N, int64_t K, int64_t L) {
  __shared__ double sh[kThreads];
  const int tid = static_cast<int>(threadIdx.x);
  for (int64_t k = blockIdx.x; k < K; k += gridDim.x) {
    sh[tid] = bn::partial_sum(dy, N, K, L, k, tid, kThreads);
    __syncthreads();
    for (int stride = kThreads / 2; stride > 0; stride /= 2) {
      bn::tree_step(sh, tid, stride);
      __syncthreads();
    }
    if (tid == 0) db[k] = static_cast<float>(sh[0]);
    __syncthreads();  // sh[0] is read before the next channel overwrites sh
  }
}

}  // namespace

void conv2d_bias_grad(cudaStream_t stream, const float* dy, float* db, int64_t N, int64_t K, int64_t L) {
  if (K <= 0) return;
  bias_grad_kernel<<<static_cast<unsigned>(std::min<int64_t>(K, 1 << 20)), kThreads, 0, stream>>>(dy, db, N, K, L);
  MNEMO_CUDA_LAUNCHED();
}

}  // namespace mnemo::cuda
