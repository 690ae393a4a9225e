// Batch-norm kernels (see batch_norm.h). One block of kThreads threads per channel (a block loops
// over channels blockIdx.x, blockIdx.x + gridDim.x, ...): per-thread double partial sums in the
// fixed order of batch_norm_math.h, a fixed-shape shared-memory tree, then the elementwise pass
// over the same channel. The maths is batch_norm_math.h's, shared with the CPU test.
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

unsigned channel_blocks(int64_t C) { return static_cast<unsigned>(std::min<int64_t>(C, 1 << 20)); }

__global__ void train_forward_kernel(const float* x, const float* gamma, const float* beta, float* y, float* mean,
                                     float* inv_std, int64_t N, int64_t C, int64_t L, double eps) {
  __shared__ double sh[kThreads];
  const int tid = static_cast<int>(threadIdx.x);
  const double count = static_cast<double>(N * L);
  for (int64_t ch = blockIdx.x; ch < C; ch += gridDim.x) {
    const double m = bn::mean_of(block_sum(bn::partial_sum(x, N, C, L, ch, tid, kThreads), sh), count);
    const double is = bn::inv_std_of(block_sum(bn::partial_sq_dev(x, N, C, L, ch, m, tid, kThreads), sh), count, eps);
    if (tid == 0) {
      mean[ch] = static_cast<float>(m);
      inv_std[ch] = static_cast<float>(is);
    }
    const float mt = static_cast<float>(m), scale = bn::scale_of(gamma[ch], is), b = beta[ch];
    for (bn::ChannelWalk w(N, C, L, ch, tid, kThreads); w.valid(); w.next()) {
      const int64_t o = w.offset();
      y[o] = bn::normalize(x[o], mt, scale, b);
    }
  }
}

__global__ void inference_forward_kernel(const float* x, const float* gamma, const float* beta,
                                         const float* running_mean, const float* running_var, float* y, int64_t N,
                                         int64_t C, int64_t L, double eps) {
  const int tid = static_cast<int>(threadIdx.x);
  for (int64_t ch = blockIdx.x; ch < C; ch += gridDim.x) {
    const float mt = running_mean[ch];
    const float scale = bn::scale_of(gamma[ch], bn::running_inv_std(static_cast<double>(running_var[ch]), eps));
    const float b = beta[ch];
    for (bn::ChannelWalk w(N, C, L, ch, tid, kThreads); w.valid(); w.next()) {
      const int64_t o = w.offset();
      y[o] = bn::normalize(x[o], mt, scale, b);
    }
  }
}

// Both backward ops: stat is inv_std (training) or running_var (inference, with eps).
__global__ void backward_kernel(const float* x, const float* gamma, const float* mean, const float* stat,
                                const float* dy, float* dx, float* dgamma, float* dbeta, int64_t N, int64_t C,
                                int64_t L, bool inference, double eps) {
  __shared__ double sh[kThreads];
  const int tid = static_cast<int>(threadIdx.x);
  const double count = static_cast<double>(N * L);
  for (int64_t ch = blockIdx.x; ch < C; ch += gridDim.x) {
    const float mt = mean[ch];
    double pdy = 0, pdyx = 0;
    bn::partial_grad_sums(x, dy, N, C, L, ch, static_cast<double>(mt), tid, kThreads, &pdy, &pdyx);
    const double sdy = block_sum(pdy, sh);
    const double sdyx = block_sum(pdyx, sh);
    double k[4];
    if (inference)
      bn::inference_grad_coeffs(sdyx, gamma[ch], stat[ch], eps, k);
    else
      bn::grad_coeffs(sdy, sdyx, gamma[ch], stat[ch], count, k);
    if (tid == 0) {
      dbeta[ch] = static_cast<float>(sdy);
      dgamma[ch] = static_cast<float>(k[0]);
    }
    const float k1 = static_cast<float>(k[1]), k2 = static_cast<float>(k[2]), k3 = static_cast<float>(k[3]);
    for (bn::ChannelWalk w(N, C, L, ch, tid, kThreads); w.valid(); w.next()) {
      const int64_t o = w.offset();
      dx[o] = bn::grad_x(k1, k2, k3, dy[o], x[o], mt);
    }
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

}  // namespace

void batch_norm_train_forward(cudaStream_t stream, const float* x, const float* gamma, const float* beta, float* y,
                              float* mean, float* inv_std, int64_t N, int64_t C, int64_t L, double eps) {
  if (C <= 0) return;
  train_forward_kernel<<<channel_blocks(C), kThreads, 0, stream>>>(x, gamma, beta, y, mean, inv_std, N, C, L, eps);
  MNEMO_CUDA_LAUNCHED();
}

void batch_norm_inference_forward(cudaStream_t stream, const float* x, const float* gamma, const float* beta,
                                  const float* running_mean, const float* running_var, float* y, int64_t N,
                                  int64_t C, int64_t L, double eps) {
  if (C <= 0 || N * L <= 0) return;
  inference_forward_kernel<<<channel_blocks(C), kThreads, 0, stream>>>(x, gamma, beta, running_mean, running_var, y,
                                                                       N, C, L, eps);
  MNEMO_CUDA_LAUNCHED();
}

void batch_norm_backward(cudaStream_t stream, const float* x, const float* gamma, const float* mean,
                         const float* inv_std, const float* dy, float* dx, float* dgamma, float* dbeta, int64_t N,
                         int64_t C, int64_t L) {
  if (C <= 0) return;
  backward_kernel<<<channel_blocks(C), kThreads, 0, stream>>>(x, gamma, mean, inv_std, dy, dx, dgamma, dbeta, N, C, L,
                                                              false, 0.0);
  MNEMO_CUDA_LAUNCHED();
}

void batch_norm_inference_backward(cudaStream_t stream, const float* x, const float* gamma, const float* running_mean,
                                   const float* running_var, const float* dy, float* dx, float* dgamma, float* dbeta,
                                   int64_t N, int64_t C, int64_t L, double eps) {
  if (C <= 0) return;
  backward_kernel<<<channel_blocks(C), kThreads, 0, stream>>>(x, gamma, running_mean, running_var, dy, dx, dgamma,
                                                              dbeta, N, C, L, true, eps);
  MNEMO_CUDA_LAUNCHED();
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
