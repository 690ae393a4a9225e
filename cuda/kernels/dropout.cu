// Dropout kernel (see dropout.h); the mask is dropout_math.h's, bitwise the CPU op's, and the
// scaling is one float multiply as in ops/dropout.cpp.
#include "cuda/kernels/common.cuh"
#include "cuda/kernels/dropout.h"
#include "cuda/kernels/dropout_math.h"

namespace mnemo::cuda {
namespace {

__global__ void dropout_kernel(const float* x, const int32_t* step, float* y, int64_t n, float p, float scale,
                               uint64_t seed, uint64_t offset) {
  const uint64_t st = static_cast<uint64_t>(static_cast<uint32_t>(*step));
  MNEMO_GRID_LOOP(i, n) y[i] = dropout::keep(seed, st, offset + static_cast<uint64_t>(i), p) ? __fmul_rn(x[i], scale) : 0.0f;
}

}  // namespace

void dropout_forward(cudaStream_t stream, const float* x, const int32_t* step, float* y, int64_t n, float p, float scale,
                     uint64_t seed, uint64_t offset) {
  if (n <= 0) return;
  dropout_kernel<<<blocks_for(n), kThreads, 0, stream>>>(x, step, y, n, p, scale, seed, offset);
  MNEMO_CUDA_LAUNCHED();
}

}  // namespace mnemo::cuda
