// SGD update kernel (see optimizer.h). The multiply-adds are fused explicitly, as g++ -march=native
// contracts the CPU op (ops/optimizer.cpp): v' = fma(m, v, fma(wd, w, g)), w' = fma(-lr, v', w);
// so the update is bitwise the CPU's where the CPU build uses FMA (x86-64 with AVX2/AVX-512).
#include "cuda/kernels/common.cuh"
#include "cuda/kernels/optimizer.h"

namespace mnemo::cuda {
namespace {

__global__ void sgd_kernel(const float* w, const float* g, const float* v, float* w_out, float* v_out, int64_t n,
                           float lr, float momentum, float weight_decay) {
  MNEMO_GRID_LOOP(i, n) {
    const float wi = w[i];
    const float vi = fmaf(momentum, v[i], fmaf(weight_decay, wi, g[i]));
    v_out[i] = vi;
    w_out[i] = fmaf(-lr, vi, wi);
  }
}

}  // namespace

void sgd_update(cudaStream_t stream, const float* w, const float* g, const float* v, float* w_out, float* v_out,
                int64_t n, float lr, float momentum, float weight_decay) {
  if (n <= 0) return;
  sgd_kernel<<<blocks_for(n), kThreads, 0, stream>>>(w, g, v, w_out, v_out, n, lr, momentum, weight_decay);
  MNEMO_CUDA_LAUNCHED();
}

}  // namespace mnemo::cuda
