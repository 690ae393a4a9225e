// CUDA kernel of sgd_update (ops/optimizer.cpp): in: w, g, v  out: w', v' (in place: w -> w',
// v -> v'). The parameters (lr changes per call) come with each call's params.
#include "cuda/context.h"
#include "cuda/kernels/optimizer.h"
#include "ops/optimizer.h"

namespace mnemo::cuda {
namespace {

void sgd_k(const KernelContext& c) {
  const auto& p = c.p<ops::SgdParams>();
  sgd_update(context_of(c).stream, c.in[0].as<float>(), c.in[1].as<float>(), c.in[2].as<float>(),
             c.out[0].as<float>(), c.out[1].as<float>(), c.in[0].numel(), static_cast<float>(p.lr),
             static_cast<float>(p.momentum), static_cast<float>(p.weight_decay));
}

}  // namespace
}  // namespace mnemo::cuda

MNEMO_REGISTER_CUDA_OPS(optimizer) {
  using namespace mnemo::cuda;
  table.add("sgd_update", {sgd_k});
}
