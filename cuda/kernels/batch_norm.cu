// Batch-norm kernels (see batch_norm.h). Each channel's reductions are split over
// P = bn::split_parts(N, C, L) blocks of kThreads threads (a flat grid over the C*P (channel, part)
// pairs, block b = ch * P + p): per-thread double partial sums over the part's contiguous range in
// the fixed order of batch_norm_math.h, a fixed-shape shared-memory tree, the block's sum written
// to the workspace; then a combine kernel (one thread per channel) adds the P partials in order
// p = 0..P-1 and writes the per-channel results and coefficients; then an elementwise kernel runs
// over all N*C*L elements with a full grid. No atomics: bitwise reproducible. The maths is
// batch_norm_math.h's, shared with the CPU test. Launches: training forward 5 (sum, mean,
// squared deviations, inv_std, normalize), inference forward 2, both backwards 3 (sums,
// coefficients, dx), stats 1.
#include "cuda/kernels/batch_norm.h"
#include "cuda/kernels/batch_norm_math.h"
#include "cuda/kernels/common.cuh"

namespace mnemo::cuda {
namespace {

static_assert((kThreads & (kThreads - 1)) == 0, "the reduction tree needs a power-of-two block");

// The sum of every thread's v over the block, in the tree order of bn::tree_step. `sh` holds
// kThreads doubles; it may be reused as soon as this returns.
__device__ double block_sum(double v, double* sh) {
  const int tid = static_cast<int>(threadIdx.x);
  sh[tid] = v;
  __syncthreads();
  for (int stride = kThreads / 2; stride > 0; stride /= 2) {
    bn::tree_step(sh, tid, stride);
    __syncthreads();
  }
  const double r = sh[0];
  __syncthreads();
  return r;
}

// Blocks of the reduction kernels: one per (channel, part), the kernels loop if capped.
unsigned part_blocks(int64_t C, int64_t P) { return static_cast<unsigned>(std::min<int64_t>(C * P, 1 << 20)); }

// Flat offsets fit 32-bit arithmetic (the elementwise passes then divide in 32 bits).
bool small_index(int64_t total) { return total <= INT32_MAX; }

template <bool kSmall>
__device__ int64_t channel_at(int64_t o, int64_t C, int64_t L) {
  if (kSmall)
    return bn::channel_of<uint32_t>(static_cast<uint32_t>(o), static_cast<uint32_t>(C), static_cast<uint32_t>(L));
  return bn::channel_of<int64_t>(o, C, L);
}

// part[ch * P + p] = sum of x over part p of channel ch.
__global__ void sum_parts_kernel(const float* x, double* part, int64_t N, int64_t C, int64_t L, int64_t P) {
  __shared__ double sh[kThreads];
  const int tid = static_cast<int>(threadIdx.x);
  const int64_t M = N * L;
  for (int64_t b = blockIdx.x; b < C * P; b += gridDim.x) {
    const int64_t ch = b / P;
    const double s = block_sum(bn::partial_sum(x, N, C, L, ch, bn::part_range(M, P, b % P), tid, kThreads), sh);
    if (tid == 0) part[b] = s;
  }
}

// mean_d[ch] = the channel's mean in double.
__global__ void mean_kernel(const double* part, double* mean_d, int64_t C, int64_t P, double count) {
  MNEMO_GRID_LOOP(ch, C) { mean_d[ch] = bn::mean_of(bn::combine_parts(part + ch * P, P), count); }
}

// part[ch * P + p] = sum of (x - mean)^2 over part p of channel ch.
__global__ void sq_dev_parts_kernel(const float* x, const double* mean_d, double* part, int64_t N, int64_t C,
                                    int64_t L, int64_t P) {
  __shared__ double sh[kThreads];
  const int tid = static_cast<int>(threadIdx.x);
  const int64_t M = N * L;
  for (int64_t b = blockIdx.x; b < C * P; b += gridDim.x) {
    const int64_t ch = b / P;
    const double s =
        block_sum(bn::partial_sq_dev(x, N, C, L, ch, bn::part_range(M, P, b % P), mean_d[ch], tid, kThreads), sh);
    if (tid == 0) part[b] = s;
  }
}

// The training statistics (outputs mean, inv_std) and the normalize coefficients
// coef[4 ch ..] = {mean, scale, beta}.
__global__ void inv_std_kernel(const double* part, const double* mean_d, const float* gamma, const float* beta,
                               float* mean, float* inv_std, float* coef, int64_t C, int64_t P, double count,
                               double eps) {
  MNEMO_GRID_LOOP(ch, C) {
    const double m = mean_d[ch];
    const double is = bn::inv_std_of(bn::combine_parts(part + ch * P, P), count, eps);
    mean[ch] = static_cast<float>(m);
    inv_std[ch] = static_cast<float>(is);
    coef[4 * ch + 0] = static_cast<float>(m);
    coef[4 * ch + 1] = bn::scale_of(gamma[ch], static_cast<double>(inv_std[ch]));  // (the saved, rounded inv_std)
    coef[4 * ch + 2] = beta[ch];
  }
}

// batch_norm_recompute's coefficients from the saved statistics (as inv_std_kernel makes them).
__global__ void recompute_coef_kernel(const float* gamma, const float* beta, const float* mean, const float* inv_std,
                                      float* coef, int64_t C) {
  MNEMO_GRID_LOOP(ch, C) {
    coef[4 * ch + 0] = mean[ch];
    coef[4 * ch + 1] = bn::scale_of(gamma[ch], static_cast<double>(inv_std[ch]));
    coef[4 * ch + 2] = beta[ch];
  }
}

// The inference forward's coefficients coef[4 ch ..] = {running_mean, scale, beta}.
__global__ void inference_coef_kernel(const float* gamma, const float* beta, const float* running_mean,
                                      const float* running_var, float* coef, int64_t C, double eps) {
  MNEMO_GRID_LOOP(ch, C) {
    coef[4 * ch + 0] = running_mean[ch];
    coef[4 * ch + 1] = bn::scale_of(gamma[ch], bn::running_inv_std(static_cast<double>(running_var[ch]), eps));
    coef[4 * ch + 2] = beta[ch];
  }
}

// y = (x - mean) * scale + beta over all elements.
template <bool kSmall>
__global__ void normalize_kernel(const float* x, const float* coef, float* y, int64_t C, int64_t L, int64_t total) {
  MNEMO_GRID_LOOP(o, total) {
    const float* k = coef + 4 * channel_at<kSmall>(o, C, L);
    y[o] = bn::normalize(x[o], k[0], k[1], k[2]);
  }
}

// part_a / part_b[ch * P + p] = sums of dy and of dy * (x - mean) over part p of channel ch.
__global__ void grad_parts_kernel(const float* x, const float* dy, const float* mean, double* part_a, double* part_b,
                                  int64_t N, int64_t C, int64_t L, int64_t P) {
  __shared__ double sh[kThreads];
  const int tid = static_cast<int>(threadIdx.x);
  const int64_t M = N * L;
  for (int64_t b = blockIdx.x; b < C * P; b += gridDim.x) {
    const int64_t ch = b / P;
    double pdy = 0, pdyx = 0;
    bn::partial_grad_sums(x, dy, N, C, L, ch, bn::part_range(M, P, b % P), static_cast<double>(mean[ch]), tid,
                          kThreads, &pdy, &pdyx);
    const double sdy = block_sum(pdy, sh);
    const double sdyx = block_sum(pdyx, sh);
    if (tid == 0) {
      part_a[b] = sdy;
      part_b[b] = sdyx;
    }
  }
}

// dgamma, dbeta and the dx coefficients coef[4 ch ..] = {k1, k2, k3, mean}. stat is inv_std
// (training) or running_var (inference, with eps).
__global__ void grad_coef_kernel(const double* part_a, const double* part_b, const float* gamma, const float* mean,
                                 const float* stat, float* dgamma, float* dbeta, float* coef, int64_t C, int64_t P,
                                 double count, bool inference, double eps) {
  MNEMO_GRID_LOOP(ch, C) {
    const double sdy = bn::combine_parts(part_a + ch * P, P);
    const double sdyx = bn::combine_parts(part_b + ch * P, P);
    double k[4];
    if (inference)
      bn::inference_grad_coeffs(sdyx, gamma[ch], stat[ch], eps, k);
    else
      bn::grad_coeffs(sdy, sdyx, gamma[ch], stat[ch], count, k);
    const float mt = mean[ch];
    dbeta[ch] = static_cast<float>(sdy);
    dgamma[ch] = static_cast<float>(k[0]);
    coef[4 * ch + 0] = static_cast<float>(k[1]);
    coef[4 * ch + 1] = static_cast<float>(k[2]);
    coef[4 * ch + 2] = static_cast<float>(k[3]);
    coef[4 * ch + 3] = mt;
  }
}

// dx = k1 dy + k2 (x - mean) + k3 over all elements.
template <bool kSmall>
__global__ void grad_x_kernel(const float* x, const float* dy, const float* coef, float* dx, int64_t C, int64_t L,
                              int64_t total) {
  MNEMO_GRID_LOOP(o, total) {
    const float* k = coef + 4 * channel_at<kSmall>(o, C, L);
    dx[o] = bn::grad_x(k[0], k[1], k[2], dy[o], x[o], k[3]);
  }
}

__global__ void stats_kernel(const float* running_mean, const float* running_var, const float* mean,
                             const float* inv_std, float* new_mean, float* new_var, int64_t C, double momentum,
                             double eps, double unbias) {
  MNEMO_GRID_LOOP(ch, C) {
    bn::stats_update(running_mean[ch], running_var[ch], mean[ch], inv_std[ch], momentum, eps, unbias, &new_mean[ch],
                     &new_var[ch]);
  }
}

void launch_normalize(cudaStream_t stream, const float* x, const float* coef, float* y, int64_t C, int64_t L,
                      int64_t total) {
  if (total <= 0) return;
  if (small_index(total))
    normalize_kernel<true><<<blocks_for(total), kThreads, 0, stream>>>(x, coef, y, C, L, total);
  else
    normalize_kernel<false><<<blocks_for(total), kThreads, 0, stream>>>(x, coef, y, C, L, total);
  MNEMO_CUDA_LAUNCHED();
}

// Both backward ops: stat is inv_std (training) or running_var (inference, with eps).
void backward(cudaStream_t stream, const float* x, const float* gamma, const float* mean, const float* stat,
              const float* dy, float* dx, float* dgamma, float* dbeta, int64_t N, int64_t C, int64_t L,
              bool inference, double eps, void* workspace) {
  if (C <= 0) return;
  const int64_t P = bn::split_parts(N, C, L);
  const bn::WorkspaceLayout w = bn::workspace_layout(C, P);
  double* ws = static_cast<double*>(workspace);
  float* coef = reinterpret_cast<float*>(ws + w.coef);
  grad_parts_kernel<<<part_blocks(C, P), kThreads, 0, stream>>>(x, dy, mean, ws + w.part_a, ws + w.part_b, N, C, L,
                                                                P);
  MNEMO_CUDA_LAUNCHED();
  grad_coef_kernel<<<blocks_for(C), kThreads, 0, stream>>>(ws + w.part_a, ws + w.part_b, gamma, mean, stat, dgamma,
                                                           dbeta, coef, C, P, static_cast<double>(N * L), inference,
                                                           eps);
  MNEMO_CUDA_LAUNCHED();
  const int64_t total = N * C * L;
  if (total <= 0) return;
  if (small_index(total))
    grad_x_kernel<true><<<blocks_for(total), kThreads, 0, stream>>>(x, dy, coef, dx, C, L, total);
  else
    grad_x_kernel<false><<<blocks_for(total), kThreads, 0, stream>>>(x, dy, coef, dx, C, L, total);
  MNEMO_CUDA_LAUNCHED();
}

}  // namespace

size_t batch_norm_workspace_bytes(int64_t N, int64_t C, int64_t L, bool reductions) {
  if (C <= 0) return 0;
  const int64_t doubles = reductions ? bn::workspace_layout(C, bn::split_parts(N, C, L)).total : bn::coef_doubles(C);
  return static_cast<size_t>(doubles) * sizeof(double);
}

void batch_norm_train_forward(cudaStream_t stream, const float* x, const float* gamma, const float* beta, float* y,
                              float* mean, float* inv_std, int64_t N, int64_t C, int64_t L, double eps,
                              void* workspace) {
  if (C <= 0) return;
  const int64_t P = bn::split_parts(N, C, L);
  const bn::WorkspaceLayout w = bn::workspace_layout(C, P);
  double* ws = static_cast<double*>(workspace);
  float* coef = reinterpret_cast<float*>(ws + w.coef);
  const double count = static_cast<double>(N * L);
  sum_parts_kernel<<<part_blocks(C, P), kThreads, 0, stream>>>(x, ws + w.part_a, N, C, L, P);
  MNEMO_CUDA_LAUNCHED();
  mean_kernel<<<blocks_for(C), kThreads, 0, stream>>>(ws + w.part_a, ws + w.mean, C, P, count);
  MNEMO_CUDA_LAUNCHED();
  sq_dev_parts_kernel<<<part_blocks(C, P), kThreads, 0, stream>>>(x, ws + w.mean, ws + w.part_b, N, C, L, P);
  MNEMO_CUDA_LAUNCHED();
  inv_std_kernel<<<blocks_for(C), kThreads, 0, stream>>>(ws + w.part_b, ws + w.mean, gamma, beta, mean, inv_std, coef,
                                                         C, P, count, eps);
  MNEMO_CUDA_LAUNCHED();
  launch_normalize(stream, x, coef, y, C, L, N * C * L);
}

void batch_norm_inference_forward(cudaStream_t stream, const float* x, const float* gamma, const float* beta,
                                  const float* running_mean, const float* running_var, float* y, int64_t N,
                                  int64_t C, int64_t L, double eps, void* workspace) {
  if (C <= 0 || N * L <= 0) return;
  float* coef = static_cast<float*>(workspace);  // the coef block, at offset 0 (bn::workspace_layout)
  inference_coef_kernel<<<blocks_for(C), kThreads, 0, stream>>>(gamma, beta, running_mean, running_var, coef, C, eps);
  MNEMO_CUDA_LAUNCHED();
  launch_normalize(stream, x, coef, y, C, L, N * C * L);
}

void batch_norm_recompute(cudaStream_t stream, const float* x, const float* gamma, const float* beta, const float* mean,
                          const float* inv_std, float* y, int64_t N, int64_t C, int64_t L, void* workspace) {
  if (C <= 0) return;
  float* coef = static_cast<float*>(workspace);  // the coef block, at offset 0 (bn::workspace_layout)
  recompute_coef_kernel<<<blocks_for(C), kThreads, 0, stream>>>(gamma, beta, mean, inv_std, coef, C);
  MNEMO_CUDA_LAUNCHED();
  if (N * L > 0) launch_normalize(stream, x, coef, y, C, L, N * C * L);
}

void batch_norm_backward(cudaStream_t stream, const float* x, const float* gamma, const float* mean,
                         const float* inv_std, const float* dy, float* dx, float* dgamma, float* dbeta, int64_t N,
                         int64_t C, int64_t L, void* workspace) {
  backward(stream, x, gamma, mean, inv_std, dy, dx, dgamma, dbeta, N, C, L, false, 0.0, workspace);
}

void batch_norm_inference_backward(cudaStream_t stream, const float* x, const float* gamma, const float* running_mean,
                                   const float* running_var, const float* dy, float* dx, float* dgamma, float* dbeta,
                                   int64_t N, int64_t C, int64_t L, double eps, void* workspace) {
  backward(stream, x, gamma, running_mean, running_var, dy, dx, dgamma, dbeta, N, C, L, true, eps, workspace);
}

void batch_norm_stats(cudaStream_t stream, const float* running_mean, const float* running_var, const float* mean,
                      const float* inv_std, float* new_mean, float* new_var, int64_t C, double momentum, double eps,
                      int64_t count) {
  if (C <= 0) return;
  const double unbias = static_cast<double>(count) / static_cast<double>(count - 1);
  stats_kernel<<<blocks_for(C), kThreads, 0, stream>>>(running_mean, running_var, mean, inv_std, new_mean, new_var, C,
                                                       momentum, eps, unbias);
  MNEMO_CUDA_LAUNCHED();
}

}  // namespace mnemo::cuda
