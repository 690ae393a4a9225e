// Fused LSTM cell kernels (see lstm_cell.h); the formulas of ops/lstm_cell.cpp with CUDA's expf and
// tanhf (within 2 ulp of glibc's), one thread per (row, k).
#include "cuda/kernels/common.cuh"
#include "cuda/kernels/lstm_cell.h"

namespace mnemo::cuda {
namespace {

__device__ float sigmoid(float x) { return 1.0f / (1.0f + expf(-x)); }

__global__ void forward_kernel(const float* a, const float* a2, const float* cp, float* hout, float* c, float* act,
                               int64_t n, int64_t h) {
  MNEMO_GRID_LOOP(s, n * h) {
    const int64_t r = s / h, k = s % h, base = r * 4 * h + k;
    float x[4];
    for (int j = 0; j < 4; ++j) x[j] = a2 ? a[base + j * h] + a2[base + j * h] : a[base + j * h];
    const float i = sigmoid(x[0]), f = sigmoid(x[1]), g = tanhf(x[2]), o = sigmoid(x[3]);
    const float ig = i * g;
    const float cv = cp ? f * cp[s] + ig : ig;
    c[s] = cv;
    hout[s] = o * tanhf(cv);
    act[base] = i, act[base + h] = f, act[base + 2 * h] = g, act[base + 3 * h] = o;
  }
}

__global__ void backward_kernel(const float* act, const float* c, const float* dh, const float* dc, const float* cp,
                                float* da, float* dcp, int64_t n, int64_t h) {
  MNEMO_GRID_LOOP(s, n * h) {
    const int64_t r = s / h, k = s % h, base = r * 4 * h + k;
    const float i = act[base], f = act[base + h], g = act[base + 2 * h], o = act[base + 3 * h];
    const float tc = tanhf(c[s]);
    const float dhv = dh ? dh[s] : 0.0f;
    const float dct = (dc ? dc[s] : 0.0f) + dhv * o * (1.0f - tc * tc);
    da[base] = dct * g * i * (1.0f - i);
    da[base + h] = cp ? dct * cp[s] * f * (1.0f - f) : 0.0f;
    da[base + 2 * h] = dct * i * (1.0f - g * g);
    da[base + 3 * h] = dhv * tc * o * (1.0f - o);
    if (dcp) dcp[s] = dct * f;
  }
}

}  // namespace

void lstm_cell_forward(cudaStream_t stream, const float* gates, const float* gates_h, const float* c_prev, float* hout,
                       float* c, float* act, int64_t n, int64_t h) {
  if (n * h <= 0) return;
  forward_kernel<<<blocks_for(n * h), kThreads, 0, stream>>>(gates, gates_h, c_prev, hout, c, act, n, h);
  MNEMO_CUDA_LAUNCHED();
}

void lstm_cell_backward(cudaStream_t stream, const float* act, const float* c, const float* dh, const float* dc,
                        const float* c_prev, float* dgates, float* dc_prev, int64_t n, int64_t h) {
  if (n * h <= 0) return;
  backward_kernel<<<blocks_for(n * h), kThreads, 0, stream>>>(act, c, dh, dc, c_prev, dgates, dc_prev, n, h);
  MNEMO_CUDA_LAUNCHED();
}

}  // namespace mnemo::cuda
