// The data-parallel gradient mean (see allreduce.h).
#include "cuda/kernels/allreduce.h"
#include "cuda/kernels/common.cuh"

namespace mnemo::cuda {
namespace {

__global__ void mean_kernel(const float* rows, int64_t ranks, int64_t stride, float* out, int64_t n) {
  MNEMO_GRID_LOOP(i, n) {
    float s = rows[i];
    for (int64_t r = 1; r < ranks; ++r) s += rows[r * stride + i];
    out[i] = s / static_cast<float>(ranks);
  }
}

}  // namespace

void mean_of_rows(cudaStream_t stream, const float* rows, int64_t ranks, int64_t stride, float* out, int64_t n) {
  if (n <= 0) return;
  mean_kernel<<<blocks_for(n), kThreads, 0, stream>>>(rows, ranks, stride, out, n);
  MNEMO_CUDA_LAUNCHED();
}

}  // namespace mnemo::cuda
