// The per-channel maths of the batch-norm CUDA kernels (cuda/kernels/batch_norm.cu) and of
// conv2d_grad_bias (cuda/kernels/conv2d.cu), as plain C++17 __host__ __device__ functions, so the
// CPU test tests/cuda_batch_norm_math_test.cpp runs exactly what the GPU runs (emulating the 256
// threads of a block one after another) and compares it with the CPU ops of ops/batch_norm.cpp.
//
// Layout: x viewed as [N, C, L] (L = H*W, or 1 for x[N,C]); channel ch holds M = N*L values.
// A channel reduction is one block of `nthreads` threads: thread tid sums, in double and in this
// order, the values j = tid, tid + nthreads, tid + 2*nthreads, ... < M (j -> n = j / L, i = j % L);
// then the nthreads partial sums are combined by a fixed-shape tree (tree_step, halving strides).
// The order depends only on the shape and nthreads, so the results are bitwise reproducible.
// The coefficient and elementwise functions mirror ops/batch_norm.cpp operation for operation
// (double statistics, float elementwise passes).
#pragma once
#include <cmath>
#include <cstdint>

#ifndef MNEMO_HD
#if defined(__CUDACC__)
#define MNEMO_HD __host__ __device__
#else
#define MNEMO_HD
#endif
#endif

namespace mnemo::cuda::bn {

// The elements of channel ch that thread tid of nthreads visits, in order. Usage:
//   for (ChannelWalk w(N, C, L, ch, tid, nthreads); w.valid(); w.next()) use(x[w.offset()]);
struct ChannelWalk {
  int64_t C, L, ch, M, stride, step_n, step_i;
  int64_t j, n, i;
  MNEMO_HD ChannelWalk(int64_t N_, int64_t C_, int64_t L_, int64_t ch_, int tid, int nthreads)
      : C(C_), L(L_), ch(ch_), M(N_ * L_), stride(nthreads), step_n(0), step_i(0), j(tid), n(0), i(0) {
    if (M > 0) {  // L >= 1 here
      step_n = nthreads / L;
      step_i = nthreads % L;
      n = tid / L;
      i = tid % L;
    }
  }
  MNEMO_HD bool valid() const { return j < M; }
  MNEMO_HD int64_t offset() const { return (n * C + ch) * L + i; }
  MNEMO_HD void next() {
    j += stride;
    n += step_n;
    i += step_i;
    if (i >= L) {
      i -= L;
      ++n;
    }
  }
};

// Thread tid's partial sum of x over channel ch.
MNEMO_HD inline double partial_sum(const float* x, int64_t N, int64_t C, int64_t L, int64_t ch, int tid,
                                   int nthreads) {
  double s = 0;
  for (ChannelWalk w(N, C, L, ch, tid, nthreads); w.valid(); w.next()) s += static_cast<double>(x[w.offset()]);
  return s;
}

// Thread tid's partial sum of (x - mean)^2 over channel ch (mean in double, as the CPU's).
MNEMO_HD inline double partial_sq_dev(const float* x, int64_t N, int64_t C, int64_t L, int64_t ch, double mean,
                                      int tid, int nthreads) {
  double s = 0;
  for (ChannelWalk w(N, C, L, ch, tid, nthreads); w.valid(); w.next()) {
    const double d = static_cast<double>(x[w.offset()]) - mean;
    s += d * d;
  }
  return s;
}

// Thread tid's partial sums of dy and of dy * (x - mean) over channel ch.
MNEMO_HD inline void partial_grad_sums(const float* x, const float* dy, int64_t N, int64_t C, int64_t L, int64_t ch,
                                       double mean, int tid, int nthreads, double* sdy, double* sdyx) {
  double a = 0, b = 0;
  for (ChannelWalk w(N, C, L, ch, tid, nthreads); w.valid(); w.next()) {
    const int64_t o = w.offset();
    const double g = static_cast<double>(dy[o]);
    a += g;
    b += g * (static_cast<double>(x[o]) - mean);
  }
  *sdy = a;
  *sdyx = b;
}

// One level of the combining tree: v[tid] += v[tid + stride] for tid < stride. The block runs
// stride = nthreads/2, nthreads/4, ..., 1 (nthreads a power of two) with a barrier after each
// level; v[0] is then the channel's sum.
MNEMO_HD inline void tree_step(double* v, int tid, int stride) {
  if (tid < stride) v[tid] += v[tid + stride];
}

// The whole tree on the host, in the block's order (tests).
inline double tree_reduce_host(double* v, int nthreads) {
  for (int stride = nthreads / 2; stride > 0; stride /= 2)
    for (int tid = 0; tid < stride; ++tid) tree_step(v, tid, stride);
  return v[0];
}

// std::max(a, b) exactly (a NaN a is returned as is), usable on the device.
MNEMO_HD inline double max_like_std(double a, double b) { return (a < b) ? b : a; }

// 1 / sqrt(running_var + eps), a negative running variance read as 0 (ops/batch_norm.cpp).
MNEMO_HD inline double running_inv_std(double running_var, double eps) {
  return 1.0 / ::sqrt(max_like_std(running_var, 0.0) + eps);
}

// Training forward: the channel's mean and inv_std from the two sums (count = N*L).
MNEMO_HD inline double mean_of(double sum, double count) { return count > 0 ? sum / count : 0.0; }
MNEMO_HD inline double inv_std_of(double sq_dev_sum, double count, double eps) {
  return 1.0 / ::sqrt((count > 0 ? sq_dev_sum / count : 0.0) + eps);
}

// The float elementwise pass of both forwards: y = (x - mean) * scale + beta.
MNEMO_HD inline float scale_of(float gamma, double inv_std) {
  return static_cast<float>(static_cast<double>(gamma) * inv_std);
}
MNEMO_HD inline float normalize(float x, float mean, float scale, float beta) { return (x - mean) * scale + beta; }

// Backward coefficients {dgamma, k1, k2, k3}: dx = k1 * dy + k2 * (x - mean) + k3 (float),
// dbeta = sdy. Training (batch statistics):
MNEMO_HD inline void grad_coeffs(double sdy, double sdyx, float gamma, float inv_std, double count, double* out) {
  const double is = static_cast<double>(inv_std), gi = static_cast<double>(gamma) * is;
  const double dgamma = sdyx * is;
  out[0] = dgamma;
  out[1] = gi;
  out[2] = -gi * is * dgamma / count;
  out[3] = -gi * sdy / count;
}
// training=false (running statistics):
MNEMO_HD inline void inference_grad_coeffs(double sdyx, float gamma, float running_var, double eps, double* out) {
  const double is = running_inv_std(static_cast<double>(running_var), eps);
  out[0] = sdyx * is;
  out[1] = static_cast<double>(gamma) * is;
  out[2] = 0.0;
  out[3] = 0.0;
}
MNEMO_HD inline float grad_x(float k1, float k2, float k3, float dy, float x, float mean) {
  return k1 * dy + k2 * (x - mean) + k3;
}

// batch_norm_stats for one channel (unbias = count / (count - 1)); reads everything before the
// caller writes (the op runs in place).
MNEMO_HD inline void stats_update(float running_mean, float running_var, float mean, float inv_std, double momentum,
                                  double eps, double unbias, float* new_mean, float* new_var) {
  const double is = static_cast<double>(inv_std);
  const double var = max_like_std(1.0 / (is * is) - eps, 0.0) * unbias;
  const double nm = (1 - momentum) * static_cast<double>(running_mean) + momentum * static_cast<double>(mean);
  const double nv = (1 - momentum) * static_cast<double>(running_var) + momentum * var;
  *new_mean = static_cast<float>(nm);
  *new_var = static_cast<float>(nv);
}

}  // namespace mnemo::cuda::bn
