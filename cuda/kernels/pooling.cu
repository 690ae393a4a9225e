// Pooling kernels (see pooling.h). One thread per output element (forward) or per input cell
// (backward), the math in pooling_math.h: the same order of operations as ops/pooling.cpp, so the
// results are bitwise the CPU's. global_avg_pool uses 16 threads per plane, one per lane of the
// CPU's 16-lane double sum, combined in the CPU's pairwise order.
#include "cuda/kernels/common.cuh"
#include "cuda/kernels/pooling.h"

namespace mnemo::cuda {
namespace {

__global__ void max_forward_kernel(pool::Geom g, const float* x, float* y, int64_t n) {
  const int64_t per_plane = g.op * g.oq;
  MNEMO_GRID_LOOP(i, n) {
    const int64_t plane = i / per_plane, o = i - plane * per_plane;
    const int64_t pi = o / g.oq, qi = o - pi * g.oq;
    y[i] = pool::max_pool_value(g, x + plane * g.h * g.w, pi, qi);
  }
}

__global__ void max_backward_kernel(pool::Geom g, const float* x, const float* y, const float* dy, float* dx,
                                    int64_t n) {
  const int64_t per_plane = g.h * g.w, out_plane = g.op * g.oq;
  MNEMO_GRID_LOOP(i, n) {
    const int64_t plane = i / per_plane, cell = i - plane * per_plane;
    const int64_t hh = cell / g.w, ww = cell - hh * g.w;
    dx[i] = pool::max_pool_grad_cell(g, x + plane * per_plane, y + plane * out_plane, dy + plane * out_plane, hh, ww);
  }
}

__global__ void avg_forward_kernel(pool::Geom g, const float* x, float* y, int64_t n) {
  const int64_t per_plane = g.op * g.oq;
  MNEMO_GRID_LOOP(i, n) {
    const int64_t plane = i / per_plane, o = i - plane * per_plane;
    const int64_t pi = o / g.oq, qi = o - pi * g.oq;
    y[i] = pool::avg_pool_value(g, x + plane * g.h * g.w, pi, qi);
  }
}

__global__ void avg_backward_kernel(pool::Geom g, const float* dy, float* dx, int64_t n) {
  const int64_t per_plane = g.h * g.w, out_plane = g.op * g.oq;
  MNEMO_GRID_LOOP(i, n) {
    const int64_t plane = i / per_plane, cell = i - plane * per_plane;
    const int64_t hh = cell / g.w, ww = cell - hh * g.w;
    dx[i] = pool::avg_pool_grad_cell(g, dy + plane * out_plane, hh, ww);
  }
}

// 16 consecutive threads (half a warp; kThreads is a multiple of 32) per plane: thread `lane` sums
// its lane into shared memory, then lane 0 combines the 16 lane sums. The grid-stride loop runs over
// planes; the 16 threads of a group take the same iterations, so the barrier over the half warp
// (mask) is always reached by all 16 threads (the other half warp may have left the loop).
constexpr int kLanes = pool::kGlobalLanes;
static_assert(kThreads % 32 == 0 && kLanes == 16, "half-warp groups");

__global__ void global_forward_kernel(const float* x, float* y, int64_t planes, int64_t hw) {
  __shared__ double lanes[kThreads];
  const int lane = static_cast<int>(threadIdx.x % kLanes);
  const int group = static_cast<int>(threadIdx.x / kLanes);
  const unsigned mask = 0xFFFFu << (16 * ((threadIdx.x / 16) % 2));
  const int64_t groups_per_block = kThreads / kLanes;
  for (int64_t plane = static_cast<int64_t>(blockIdx.x) * groups_per_block + group; plane < planes;
       plane += static_cast<int64_t>(gridDim.x) * groups_per_block) {
    double* a = lanes + group * kLanes;
    a[lane] = pool::global_lane_sum(x + plane * hw, hw, lane);
    __syncwarp(mask);
    if (lane == 0) y[plane] = pool::global_avg_value(pool::global_combine(a), hw);
    __syncwarp(mask);  // lane 0 has read every lane before the next plane overwrites them
  }
}

__global__ void global_backward_kernel(const float* dy, float* dx, int64_t n, int64_t hw) {
  MNEMO_GRID_LOOP(i, n) dx[i] = pool::global_avg_grad_value(dy[i / hw], hw);
}

}  // namespace

void max_pool_forward(cudaStream_t stream, const pool::Geom& g, const float* x, float* y, int64_t planes) {
  const int64_t n = planes * g.op * g.oq;
  if (n <= 0) return;
  max_forward_kernel<<<blocks_for(n), kThreads, 0, stream>>>(g, x, y, n);
  MNEMO_CUDA_LAUNCHED();
}

void max_pool_backward(cudaStream_t stream, const pool::Geom& g, const float* x, const float* y, const float* dy,
                       float* dx, int64_t planes) {
  const int64_t n = planes * g.h * g.w;
  if (n <= 0) return;
  max_backward_kernel<<<blocks_for(n), kThreads, 0, stream>>>(g, x, y, dy, dx, n);
  MNEMO_CUDA_LAUNCHED();
}

void avg_pool_forward(cudaStream_t stream, const pool::Geom& g, const float* x, float* y, int64_t planes) {
  const int64_t n = planes * g.op * g.oq;
  if (n <= 0) return;
  avg_forward_kernel<<<blocks_for(n), kThreads, 0, stream>>>(g, x, y, n);
  MNEMO_CUDA_LAUNCHED();
}

void avg_pool_backward(cudaStream_t stream, const pool::Geom& g, const float* dy, float* dx, int64_t planes) {
  const int64_t n = planes * g.h * g.w;
  if (n <= 0) return;
  avg_backward_kernel<<<blocks_for(n), kThreads, 0, stream>>>(g, dy, dx, n);
  MNEMO_CUDA_LAUNCHED();
}

void global_avg_pool_forward(cudaStream_t stream, const float* x, float* y, int64_t planes, int64_t hw) {
  if (planes <= 0) return;
  // hw == 0 (an empty plane): 0 / 0 = NaN, as the CPU's plane_sum(.., 0) / 0.
  global_forward_kernel<<<blocks_for(planes * kLanes), kThreads, 0, stream>>>(x, y, planes, hw);
  MNEMO_CUDA_LAUNCHED();
}

void global_avg_pool_backward(cudaStream_t stream, const float* dy, float* dx, int64_t planes, int64_t hw) {
  const int64_t n = planes * hw;
  if (n <= 0) return;
  global_backward_kernel<<<blocks_for(n), kThreads, 0, stream>>>(dy, dx, n, hw);
  MNEMO_CUDA_LAUNCHED();
}

}  // namespace mnemo::cuda
