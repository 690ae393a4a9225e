// The per-channel maths of the batch-norm CUDA kernels (cuda/kernels/batch_norm.cu) and of
// conv2d_grad_bias (cuda/kernels/conv2d.cu), as plain C++17 __host__ __device__ functions, so the
// CPU test tests/cuda_batch_norm_math_test.cpp runs exactly what the GPU runs (emulating the blocks
// and their 256 threads one after another) and compares it with the CPU ops of ops/batch_norm.cpp.
//
// Layout: x viewed as [N, C, L] (L = H*W, or 1 for x[N,C]); channel ch holds M = N*L values, its
// element e in [0, M) lying at offset (e / L) * C * L + ch * L + e % L.
// A channel's reduction is split over P = split_parts(N, C, L) blocks (a pure function of the
// shape, see there). Block (ch, p) owns the contiguous range part_range(M, P, p) = [begin, end) of
// e; its thread tid of nthreads sums, in double and in this order, e = begin + tid,
// begin + tid + nthreads, ... < end; the nthreads partial sums are combined by a fixed-shape tree
// (tree_step, halving strides) into partial[ch * P + p]; then one thread per channel adds the P
// partials in the order p = 0, 1, ..., P-1 (combine_parts). The order depends only on the shape
// and nthreads, so the results are bitwise reproducible (no atomics).
// The coefficient and elementwise functions mirror ops/batch_norm.cpp operation for operation
// (double statistics, float elementwise passes); the elementwise passes run over all N*C*L
// elements with a flat grid, reading per-channel coefficients (channel_of gives the channel).
#pragma once
#include <cmath>
#include <cstdint>

#include "cuda/kernels/hd.h"

namespace mnemo::cuda::bn {

// The split of each channel's reduction: P blocks per channel, so that C*P gives about
// kSplitTargetBlocks blocks in all (4 resident 256-thread blocks on each of an H100's 132 SMs)
// while every block keeps at least kSplitMinElements elements:
//   P = max(1, min(ceil(kSplitTargetBlocks / C), floor(M / kSplitMinElements)))
// so P = 1 for channels below 2 * kSplitMinElements values and for C >= kSplitTargetBlocks, and
// P <= kSplitTargetBlocks always.
// ResNet-50, batch 64: C=64 at 112x112 (M = 802816) -> P = 9 (576 blocks of ~89K elements);
// C=256 at 56x56 -> 3; C=512 at 28x28 -> 2; C=1024 at 14x14 -> 1.
// A pure function of the shape (never of the device), so the workspace size and the summation
// order are the same on every machine.
constexpr int64_t kSplitTargetBlocks = 4 * 132;
constexpr int64_t kSplitMinElements = 16384;

MNEMO_HD inline int64_t split_parts(int64_t N, int64_t C, int64_t L) {
  const int64_t M = N * L;
  if (C <= 0 || M <= 0) return 1;
  int64_t P = (kSplitTargetBlocks + C - 1) / C;
  if (P > M / kSplitMinElements) P = M / kSplitMinElements;
  return P < 1 ? 1 : P;
}

// The elements [begin, end) of a channel's M that part p of P reduces: contiguous, in order,
// sizes M / P or M / P + 1 (the first M % P parts take the extra one); they tile [0, M).
struct Range {
  int64_t begin, end;
};
MNEMO_HD inline int64_t part_begin(int64_t M, int64_t P, int64_t p) {
  const int64_t r = M % P;
  return (M / P) * p + (p < r ? p : r);
}
MNEMO_HD inline Range part_range(int64_t M, int64_t P, int64_t p) {
  return {part_begin(M, P, p), part_begin(M, P, p + 1)};
}

// The elements of channel ch in `range` that thread tid of nthreads visits, in order. Usage:
//   for (ChannelWalk w(N, C, L, ch, range, tid, nthreads); w.valid(); w.next()) use(x[w.offset()]);
struct ChannelWalk {
  int64_t C, L, ch, end, stride, step_n, step_i;
  int64_t j, n, i;
  MNEMO_HD ChannelWalk(int64_t N_, int64_t C_, int64_t L_, int64_t ch_, Range range, int tid, int nthreads)
      : C(C_), L(L_), ch(ch_), end(range.end), stride(nthreads), step_n(0), step_i(0), j(range.begin + tid), n(0),
        i(0) {
    (void)N_;
    if (j < end) {  // a non-empty range: L >= 1
      step_n = nthreads / L;
      step_i = nthreads % L;
      n = j / L;
      i = j % L;
    }
  }
  MNEMO_HD bool valid() const { return j < end; }
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

// Thread tid's partial sum of x over `range` of channel ch.
MNEMO_HD inline double partial_sum(const float* x, int64_t N, int64_t C, int64_t L, int64_t ch, Range range, int tid,
                                   int nthreads) {
  double s = 0;
  for (ChannelWalk w(N, C, L, ch, range, tid, nthreads); w.valid(); w.next()) s += static_cast<double>(x[w.offset()]);
  return s;
}

// Thread tid's partial sum of (x - mean)^2 over `range` of channel ch (mean in double, as the CPU's).
MNEMO_HD inline double partial_sq_dev(const float* x, int64_t N, int64_t C, int64_t L, int64_t ch, Range range,
                                      double mean, int tid, int nthreads) {
  double s = 0;
  for (ChannelWalk w(N, C, L, ch, range, tid, nthreads); w.valid(); w.next()) {
    const double d = static_cast<double>(x[w.offset()]) - mean;
    s += d * d;
  }
  return s;
}

// Thread tid's partial sums of dy and of dy * (x - mean) over `range` of channel ch.
MNEMO_HD inline void partial_grad_sums(const float* x, const float* dy, int64_t N, int64_t C, int64_t L, int64_t ch,
                                       Range range, double mean, int tid, int nthreads, double* sdy, double* sdyx) {
  double a = 0, b = 0;
  for (ChannelWalk w(N, C, L, ch, range, tid, nthreads); w.valid(); w.next()) {
    const int64_t o = w.offset();
    const double g = static_cast<double>(dy[o]);
    a += g;
    b += g * (static_cast<double>(x[o]) - mean);
  }
  *sdy = a;
  *sdyx = b;
}

// The channel's sum from its P block partials part[0..P-1], added in the order p = 0, 1, ...
// (P = 1 gives part[0] unchanged, the single-block result).
MNEMO_HD inline double combine_parts(const double* part, int64_t P) {
  double s = part[0];
  for (int64_t p = 1; p < P; ++p) s += part[p];
  return s;
}

// The channel of flat offset o in [0, N*C*L) (the elementwise passes).
template <class I>
MNEMO_HD inline I channel_of(I o, I C, I L) {
  return (o / L) % C;
}

// The device workspace of the batch-norm kernels, in doubles (the planner aligns it to 256 bytes):
//   [coef: 2*C doubles = 4*C floats, the elementwise pass's per-channel coefficients]
//   [mean: C doubles, the training forward's double mean]
//   [part_a: C*P doubles][part_b: C*P doubles] (block partials, index ch * P + p)
// The inference forward uses only coef (coef_doubles).
struct WorkspaceLayout {
  int64_t coef, mean, part_a, part_b, total;  // offsets and total size in doubles
};
MNEMO_HD inline WorkspaceLayout workspace_layout(int64_t C, int64_t P) {
  return {0, 2 * C, 3 * C, 3 * C + C * P, 3 * C + 2 * C * P};
}
MNEMO_HD inline int64_t coef_doubles(int64_t C) { return 2 * C; }

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
