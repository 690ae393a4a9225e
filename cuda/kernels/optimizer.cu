// Optimiser kernels (see optimizer.h). The multiply-adds are fused explicitly, as g++ -march=native
// contracts the CPU op (ops/optimizer.cpp): v' = fma(m, v, fma(wd, w, g)), w' = fma(-lr, v', w);
// so the update is bitwise the CPU's where the CPU build uses FMA (x86-64 with AVX2/AVX-512).
#include "cuda/kernels/common.cuh"
#include "cuda/kernels/optimizer.h"

namespace mnemo::cuda {
namespace {

__global__ void copy_status(const int32_t* in, int32_t* out) { out[0] = in[0]; }

// Marks `status` with `mark` where it is 0 and some x is not finite (every writer stores the
// same word, so the result does not depend on which thread writes last).
__global__ void mark_non_finite(const float* x, int64_t n, int32_t* status, int32_t mark) {
  MNEMO_GRID_LOOP(i, n) {
    if (!isfinite(x[i]) && *status == 0) *status = mark;
  }
}

// The update's values, computed the same way for the check and the write.
__device__ float velocity(float momentum, float v, float weight_decay, float w, float g) {
  return fmaf(momentum, v, fmaf(weight_decay, w, g));
}

// Marks `status` with `mark` where it is 0 and g, v' or w' is not finite at some i.
__global__ void mark_bad_update(const float* w, const float* g, const float* v, int64_t n, const float* lr, int32_t* status,
                                int32_t mark, float momentum, float weight_decay) {
  const float a = *lr;
  MNEMO_GRID_LOOP(i, n) {
    const float vi = velocity(momentum, v[i], weight_decay, w[i], g[i]);
    if ((!isfinite(g[i]) || !isfinite(vi) || !isfinite(fmaf(-a, vi, w[i]))) && *status == 0) *status = mark;
  }
}

__global__ void sgd_kernel(const float* w, const float* g, const float* v, float* w_out, float* v_out, int64_t n,
                           const float* lr, const int32_t* status, float momentum, float weight_decay) {
  if (*status != 0) {  // a failed step: w and v stay (copied when not in place)
    MNEMO_GRID_LOOP(i, n) {
      w_out[i] = w[i];
      v_out[i] = v[i];
    }
    return;
  }
  const float a = *lr;
  MNEMO_GRID_LOOP(i, n) {
    const float wi = w[i];
    const float vi = velocity(momentum, v[i], weight_decay, wi, g[i]);
    v_out[i] = vi;
    w_out[i] = fmaf(-a, vi, wi);
  }
}

__global__ void zero_status(int32_t* status) { status[0] = 0; }

__global__ void assign_kernel(int32_t n_words, const uint32_t* value, uint32_t* dst, const int32_t* status) {
  if (*status != 0) return;
  MNEMO_GRID_LOOP(i, n_words) dst[i] = value[i];
}

}  // namespace

void sgd_update(cudaStream_t stream, const float* w, const float* g, const float* v, const float* lr, const int32_t* status_in,
                float* w_out, float* v_out, int32_t* status_out, int64_t n, float momentum, float weight_decay, int32_t index) {
  if (status_out != status_in) {
    copy_status<<<1, 1, 0, stream>>>(status_in, status_out);
    MNEMO_CUDA_LAUNCHED();
  }
  if (n <= 0) return;
  mark_bad_update<<<blocks_for(n), kThreads, 0, stream>>>(w, g, v, n, lr, status_out, index, momentum, weight_decay);
  MNEMO_CUDA_LAUNCHED();
  sgd_kernel<<<blocks_for(n), kThreads, 0, stream>>>(w, g, v, w_out, v_out, n, lr, status_out, momentum, weight_decay);
  MNEMO_CUDA_LAUNCHED();
}

void assign_if_ok(cudaStream_t stream, const void* value, void* dst, int64_t bytes, const int32_t* status) {
  const int64_t words = bytes / 4;  // float32 tensors: whole words
  if (words <= 0 || value == dst) return;
  assign_kernel<<<blocks_for(words), kThreads, 0, stream>>>(static_cast<int32_t>(words), static_cast<const uint32_t*>(value),
                                                            static_cast<uint32_t*>(dst), status);
  MNEMO_CUDA_LAUNCHED();
}

void finite_check(cudaStream_t stream, const float* x, int64_t n, int32_t* status) {
  zero_status<<<1, 1, 0, stream>>>(status);
  MNEMO_CUDA_LAUNCHED();
  if (n <= 0) return;
  mark_non_finite<<<blocks_for(n), kThreads, 0, stream>>>(x, n, status, -1);
  MNEMO_CUDA_LAUNCHED();
}

}  // namespace mnemo::cuda
