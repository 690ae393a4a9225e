// Utility kernels (see util.h).
#include "cuda/kernels/common.cuh"
#include "cuda/kernels/util.h"

namespace mnemo::cuda {
namespace {

__global__ void fill_kernel(float* x, int64_t n, float value) {
  MNEMO_GRID_LOOP(i, n) x[i] = value;
}

}  // namespace

void fill(cudaStream_t stream, float* x, int64_t n, float value) {
  if (n <= 0) return;
  fill_kernel<<<blocks_for(n), kThreads, 0, stream>>>(x, n, value);
  MNEMO_CUDA_LAUNCHED();
}

}  // namespace mnemo::cuda
