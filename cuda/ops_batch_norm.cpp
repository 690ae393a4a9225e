// CUDA kernels of the batch-norm ops (ops/batch_norm.cpp): own kernels (cuda/kernels/batch_norm.cu),
// each channel's reductions split over a shape-determined number of blocks with fixed-order double
// sums, so every result is bitwise reproducible. The block partials and per-channel coefficients
// live in the op's planned workspace (batch_norm_workspace_bytes).
#include <span>

#include "cuda/context.h"
#include "cuda/kernels/batch_norm.h"
#include "ops/batch_norm.h"

namespace mnemo::cuda {
namespace {

struct Layout {  // x viewed as [n, c, l], as ops/batch_norm.cpp
  int64_t n, c, l;
};
Layout layout_of(const TensorType& x) {
  int64_t l = 1;
  for (size_t i = 2; i < x.shape.size(); ++i) l *= x.shape[i];
  return {x.shape.at(0), x.shape.at(1), l};
}
Layout layout_of(const TensorView& x) { return layout_of(x.type); }

const float* f(const TensorView& t) { return t.as<float>(); }
float* fo(const TensorView& t) { return t.as<float>(); }

// The workspace the kernel needs for x's layout; checks that the planner reserved it.
void* workspace_of(const KernelContext& c, const char* op, bool reductions) {
  const Layout L = layout_of(c.in[0]);
  const size_t need = batch_norm_workspace_bytes(L.n, L.c, L.l, reductions);
  MNEMO_CHECK(c.workspace_bytes >= need && (need == 0 || c.workspace))
      << op << ": workspace of " << c.workspace_bytes << " bytes planned, needs " << need;
  return c.workspace;
}

// Workspace queries (x = in[0]): the forward's depends on training, both backwards reduce.
void require_plain(const void* params, const char* op) {
  const int64_t b = static_cast<const ops::BatchNormParams*>(params)->block;
  MNEMO_CHECK(!b) << op << ": block " << b << " (channel-blocked activations, oneDNN's layout) runs on the CPU only; "
                  << "on a GPU build the model with model.layout: plain";
}
size_t bn_forward_workspace(Context&, const void* params, std::span<const TensorType> in,
                            std::span<const TensorType>) {
  require_plain(params, "batch_norm");
  const Layout L = layout_of(in[0]);
  return batch_norm_workspace_bytes(L.n, L.c, L.l, static_cast<const ops::BatchNormParams*>(params)->training);
}
size_t bn_grad_workspace(Context&, const void* params, std::span<const TensorType> in, std::span<const TensorType>) {
  require_plain(params, "batch norm's backward");
  const Layout L = layout_of(in[0]);
  return batch_norm_workspace_bytes(L.n, L.c, L.l, true);
}

void bn_forward(const KernelContext& c) {
  const auto& p = c.p<ops::BatchNormParams>();
  const Layout L = layout_of(c.in[0]);
  cudaStream_t s = context_of(c).stream;
  void* ws = workspace_of(c, "batch_norm", p.training);
  if (p.training)  // (x, gamma, beta) -> (y, mean, inv_std)
    batch_norm_train_forward(s, f(c.in[0]), f(c.in[1]), f(c.in[2]), fo(c.out[0]), fo(c.out[1]), fo(c.out[2]), L.n,
                             L.c, L.l, p.eps, ws);
  else  // (x, gamma, beta, running_mean, running_var) -> y
    batch_norm_inference_forward(s, f(c.in[0]), f(c.in[1]), f(c.in[2]), f(c.in[3]), f(c.in[4]), fo(c.out[0]), L.n,
                                 L.c, L.l, p.eps, ws);
}

// batch_norm_recompute (x, gamma, beta, mean, inv_std) -> y: one coefficient
// pass and the elementwise pass, no reductions (its workspace: the coefficients only).
size_t bn_recompute_workspace(Context&, const void* params, std::span<const TensorType> in,
                              std::span<const TensorType>) {
  require_plain(params, "batch_norm_recompute");
  const Layout L = layout_of(in[0]);
  return batch_norm_workspace_bytes(L.n, L.c, L.l, false);
}
void bn_recompute(const KernelContext& c) {
  const Layout L = layout_of(c.in[0]);
  batch_norm_recompute(context_of(c).stream, f(c.in[0]), f(c.in[1]), f(c.in[2]), f(c.in[3]), f(c.in[4]), fo(c.out[0]),
                       L.n, L.c, L.l, workspace_of(c, "batch_norm_recompute", false));
}

void bn_grad(const KernelContext& c) {  // (x, gamma, mean, inv_std, dy) -> (dx, dgamma, dbeta)
  const Layout L = layout_of(c.in[0]);
  batch_norm_backward(context_of(c).stream, f(c.in[0]), f(c.in[1]), f(c.in[2]), f(c.in[3]), f(c.in[4]), fo(c.out[0]),
                      fo(c.out[1]), fo(c.out[2]), L.n, L.c, L.l, workspace_of(c, "batch_norm_grad", true));
}

void bn_inference_grad(const KernelContext& c) {  // (x, gamma, running_mean, running_var, dy) -> (dx, dgamma, dbeta)
  const Layout L = layout_of(c.in[0]);
  batch_norm_inference_backward(context_of(c).stream, f(c.in[0]), f(c.in[1]), f(c.in[2]), f(c.in[3]), f(c.in[4]),
                                fo(c.out[0]), fo(c.out[1]), fo(c.out[2]), L.n, L.c, L.l,
                                c.p<ops::BatchNormParams>().eps,
                                workspace_of(c, "batch_norm_inference_grad", true));
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
  table.add("batch_norm", {bn_forward, bn_forward_workspace});
  table.add("batch_norm_recompute", {bn_recompute, bn_recompute_workspace});
  table.add("batch_norm_grad", {bn_grad, bn_grad_workspace});
  table.add("batch_norm_inference_grad", {bn_inference_grad, bn_grad_workspace});
  table.add("batch_norm_stats", {bn_stats});
}
