// CUDA kernels of the batch-norm ops (ops/batch_norm.cpp): own kernels (cuda/kernels/batch_norm.cu),
// one block per channel with fixed-order double reductions, so every result is bitwise reproducible.
#include "cuda/context.h"
#include "cuda/kernels/batch_norm.h"
#include "ops/batch_norm.h"

namespace mnemo::cuda {
namespace {

struct Layout {  // x viewed as [n, c, l], as ops/batch_norm.cpp
  int64_t n, c, l;
};
Layout layout_of(const TensorView& x) {
  int64_t l = 1;
  for (int i = 2; i < x.rank(); ++i) l *= x.dim(i);
  return {x.dim(0), x.dim(1), l};
}

const float* f(const TensorView& t) { return t.as<float>(); }
float* fo(const TensorView& t) { return t.as<float>(); }

void bn_forward(const KernelContext& c) {
  const auto& p = c.p<ops::BatchNormParams>();
  const Layout L = layout_of(c.in[0]);
  cudaStream_t s = context_of(c).stream;
  if (p.training)  // (x, gamma, beta) -> (y, mean, inv_std)
    batch_norm_train_forward(s, f(c.in[0]), f(c.in[1]), f(c.in[2]), fo(c.out[0]), fo(c.out[1]), fo(c.out[2]), L.n,
                             L.c, L.l, p.eps);
  else  // (x, gamma, beta, running_mean, running_var) -> y
    batch_norm_inference_forward(s, f(c.in[0]), f(c.in[1]), f(c.in[2]), f(c.in[3]), f(c.in[4]), fo(c.out[0]), L.n,
                                 L.c, L.l, p.eps);
}

void bn_grad(const KernelContext& c) {  // (x, gamma, mean, inv_std, dy) -> (dx, dgamma, dbeta)
  const Layout L = layout_of(c.in[0]);
  batch_norm_backward(context_of(c).stream, f(c.in[0]), f(c.in[1]), f(c.in[2]), f(c.in[3]), f(c.in[4]), fo(c.out[0]),
                      fo(c.out[1]), fo(c.out[2]), L.n, L.c, L.l);
}

void bn_inference_grad(const KernelContext& c) {  // (x, gamma, running_mean, running_var, dy) -> (dx, dgamma, dbeta)
  const Layout L = layout_of(c.in[0]);
  batch_norm_inference_backward(context_of(c).stream, f(c.in[0]), f(c.in[1]), f(c.in[2]), f(c.in[3]), f(c.in[4]),
                                fo(c.out[0]), fo(c.out[1]), fo(c.out[2]), L.n, L.c, L.l,
                                c.p<ops::BatchNormParams>().eps);
}

// (running_mean, running_var, mean, inv_std) -> (new_mean, new_var); in place allowed (0->0, 1->1).
void bn_stats(const KernelContext& c) {
  const auto& p = c.p<ops::StatsParams>();
  batch_norm_stats(context_of(c).stream, f(c.in[0]), f(c.in[1]), f(c.in[2]), f(c.in[3]), fo(c.out[0]), fo(c.out[1]),
                   c.in[0].numel(), p.momentum, p.eps, p.count);
}

}  // namespace
}  // namespace mnemo::cuda

MNEMO_REGISTER_CUDA_OPS(batch_norm) {
  using namespace mnemo::cuda;
  table.add("batch_norm", {bn_forward});
  table.add("batch_norm_grad", {bn_grad});
  table.add("batch_norm_inference_grad", {bn_inference_grad});
  table.add("batch_norm_stats", {bn_stats});
}
