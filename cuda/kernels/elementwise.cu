// Elementwise kernels (see elementwise.h): bitwise the CPU op's results (one IEEE operation per step,
// the same order).
#include "cuda/kernels/common.cuh"
#include "cuda/kernels/elementwise.h"

namespace mnemo::cuda {
namespace {

__global__ void add_kernel(const float* a, const float* b, float* y, int64_t n) {
  MNEMO_GRID_LOOP(i, n) y[i] = a[i] + b[i];
}
__global__ void mul_kernel(const float* a, const float* b, float* y, int64_t n) {
  MNEMO_GRID_LOOP(i, n) y[i] = a[i] * b[i];
}

// Up to kMaxInputs pointers per launch, passed by value.
constexpr int kMaxInputs = 8;
struct Inputs {
  const float* x[kMaxInputs];
  int k;
};

__global__ void add_n_kernel(Inputs in, float* y, int64_t n) {
  MNEMO_GRID_LOOP(i, n) {
    float acc = in.x[0][i];
    for (int j = 1; j < in.k; ++j) acc += in.x[j][i];
    y[i] = acc;
  }
}

}  // namespace

void add(cudaStream_t stream, const float* a, const float* b, float* y, int64_t n) {
  if (n <= 0) return;
  add_kernel<<<blocks_for(n), kThreads, 0, stream>>>(a, b, y, n);
  MNEMO_CUDA_LAUNCHED();
}

void mul(cudaStream_t stream, const float* a, const float* b, float* y, int64_t n) {
  if (n <= 0) return;
  mul_kernel<<<blocks_for(n), kThreads, 0, stream>>>(a, b, y, n);
  MNEMO_CUDA_LAUNCHED();
}

// More than kMaxInputs inputs: the first launch sums x[0..8) into y, each later one adds the next
// (up to 7) inputs to y (y as its input 0). y holds the float partial sum exactly, so the order of
// additions is still ((x0 + x1) + ...) + x[k-1].
void add_n(cudaStream_t stream, const float* const* x, int k, float* y, int64_t n) {
  if (n <= 0 || k <= 0) return;
  int next = 0;
  while (next < k) {
    Inputs in{};
    in.k = 0;
    if (next > 0) in.x[in.k++] = y;
    while (in.k < kMaxInputs && next < k) in.x[in.k++] = x[next++];
    add_n_kernel<<<blocks_for(n), kThreads, 0, stream>>>(in, y, n);
    MNEMO_CUDA_LAUNCHED();
  }
}

}  // namespace mnemo::cuda
