// CUDA kernels of ops/softmax_cross_entropy.cpp. softmax_cross_entropy(logits, labels) -> loss[]
// and softmax_cross_entropy_grad(logits, labels, dloss) -> dlogits (in place: logits -> dlogits).
// Labels are not checked on the host (that would need a device-to-host copy and a sync per step): a
// label outside [0, C) makes the loss NaN and its row of dlogits NaN, where the CPU op throws.
#include "cuda/context.h"
#include "cuda/kernels/softmax_cross_entropy.h"

namespace mnemo::cuda {
namespace {

size_t loss_workspace(Context&, const void*, std::span<const TensorType> in, std::span<const TensorType>) {
  return static_cast<size_t>(sce_loss_workspace_floats(in[0].shape.at(0))) * sizeof(float);
}
size_t grad_workspace(Context&, const void*, std::span<const TensorType> in, std::span<const TensorType>) {
  return static_cast<size_t>(sce_grad_workspace_floats(in[0].shape.at(0))) * sizeof(float);
}

void check_workspace(const KernelContext& c, int64_t floats, const char* op) {
  MNEMO_CHECK(c.workspace && c.workspace_bytes >= static_cast<size_t>(floats) * sizeof(float))
      << op << ": workspace of " << c.workspace_bytes << " bytes, need " << floats * sizeof(float);
}

void loss_k(const KernelContext& c) {  // in: logits[N,C], labels[N]  out: loss[]
  const int64_t rows = c.in[0].dim(0), cols = c.in[0].dim(1);
  check_workspace(c, sce_loss_workspace_floats(rows), "softmax_cross_entropy");
  sce_loss(context_of(c).stream, c.in[0].as<float>(), c.in[1].as<int32_t>(), c.out[0].as<float>(), rows, cols,
           static_cast<float*>(c.workspace));
}

void grad_k(const KernelContext& c) {  // in: logits[N,C], labels[N], dloss[]  out: dlogits[N,C]
  const int64_t rows = c.in[0].dim(0), cols = c.in[0].dim(1);
  check_workspace(c, sce_grad_workspace_floats(rows), "softmax_cross_entropy_grad");
  sce_grad(context_of(c).stream, c.in[0].as<float>(), c.in[1].as<int32_t>(), c.in[2].as<float>(),
           c.out[0].as<float>(), rows, cols, static_cast<float*>(c.workspace));
}

}  // namespace
}  // namespace mnemo::cuda

MNEMO_REGISTER_CUDA_OPS(softmax_cross_entropy) {
  using namespace mnemo::cuda;
  table.add("softmax_cross_entropy", {loss_k, loss_workspace});
  table.add("softmax_cross_entropy_grad", {grad_k, grad_workspace});
}
