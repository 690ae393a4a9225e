// Activation kernels (see activations.h). Formulas as ops/activations.cpp:
//   relu    y = x < 0 ? 0 : x            dx = y <= 0 ? 0 : dy   (NaN propagates, as in PyTorch)
//   sigmoid y = 1 / (1 + expf(-x))        dx = dy * y * (1 - y)
//   tanh    y = tanhf(x)                  dx = dy * (1 - y*y), with 1 - y*y fused (fmaf(-y, y, 1)) as
//                                         g++ -march=native contracts it in the CPU op
// relu is bitwise the CPU's; sigmoid/tanh use CUDA's expf/tanhf (within 2 ulp of the exact values; the CPU
// runs Eigen's vectorised approximations, within a few ulp).
#include "cuda/kernels/activations.h"
#include "cuda/kernels/common.cuh"

namespace mnemo::cuda {
namespace {

struct Relu {
  __device__ static float f(float x) { return x < 0.0f ? 0.0f : x; }
  __device__ static float df(float y, float dy) { return y <= 0.0f ? 0.0f : dy; }
};
struct Sigmoid {
  __device__ static float f(float x) { return 1.0f / (1.0f + expf(-x)); }
  __device__ static float df(float y, float dy) { return __fmul_rn(__fmul_rn(dy, y), 1.0f - y); }
};
struct Tanh {
  __device__ static float f(float x) { return tanhf(x); }
  __device__ static float df(float y, float dy) { return __fmul_rn(dy, fmaf(-y, y, 1.0f)); }
};

template <class A>
__global__ void forward_kernel(const float* x, float* y, int64_t n) {
  MNEMO_GRID_LOOP(i, n) y[i] = A::f(x[i]);
}
template <class A>
__global__ void backward_kernel(const float* y, const float* dy, float* dx, int64_t n) {
  MNEMO_GRID_LOOP(i, n) dx[i] = A::df(y[i], dy[i]);
}

template <class A>
void forward(cudaStream_t stream, const float* x, float* y, int64_t n) {
  forward_kernel<A><<<blocks_for(n), kThreads, 0, stream>>>(x, y, n);
  MNEMO_CUDA_LAUNCHED();
}
template <class A>
void backward(cudaStream_t stream, const float* y, const float* dy, float* dx, int64_t n) {
  backward_kernel<A><<<blocks_for(n), kThreads, 0, stream>>>(y, dy, dx, n);
  MNEMO_CUDA_LAUNCHED();
}

__global__ void clip_kernel(const float* x, float* y, int64_t n, float lo, float hi) {
  MNEMO_GRID_LOOP(i, n) {
    const float v = x[i];
    y[i] = v < lo ? lo : (v > hi ? hi : v);
  }
}
__global__ void clip_grad_kernel(const float* y, const float* dy, float* dx, int64_t n, float lo, float hi) {
  MNEMO_GRID_LOOP(i, n) {
    const float v = y[i];
    dx[i] = (v <= lo || v >= hi) ? 0.0f : dy[i];
  }
}

}  // namespace

void clip_forward(cudaStream_t stream, const float* x, float* y, int64_t n, float lo, float hi) {
  if (n <= 0) return;
  clip_kernel<<<blocks_for(n), kThreads, 0, stream>>>(x, y, n, lo, hi);
  MNEMO_CUDA_LAUNCHED();
}

void clip_backward(cudaStream_t stream, const float* y, const float* dy, float* dx, int64_t n, float lo, float hi) {
  if (n <= 0) return;
  clip_grad_kernel<<<blocks_for(n), kThreads, 0, stream>>>(y, dy, dx, n, lo, hi);
  MNEMO_CUDA_LAUNCHED();
}

void activation_forward(cudaStream_t stream, Activation a, const float* x, float* y, int64_t n) {
  if (n <= 0) return;
  switch (a) {
    case Activation::relu: forward<Relu>(stream, x, y, n); break;
    case Activation::sigmoid: forward<Sigmoid>(stream, x, y, n); break;
    case Activation::tanh: forward<Tanh>(stream, x, y, n); break;
  }
}

void activation_backward(cudaStream_t stream, Activation a, const float* y, const float* dy, float* dx, int64_t n) {
  if (n <= 0) return;
  switch (a) {
    case Activation::relu: backward<Relu>(stream, y, dy, dx, n); break;
    case Activation::sigmoid: backward<Sigmoid>(stream, y, dy, dx, n); break;
    case Activation::tanh: backward<Tanh>(stream, y, dy, dx, n); break;
  }
}

}  // namespace mnemo::cuda
