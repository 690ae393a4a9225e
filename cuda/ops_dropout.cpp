// CUDA kernels of ops/dropout.cpp: dropout and dropout_grad (the same masked scaling of x or dy),
// float32; the step counter is read from device memory.
#include "cuda/context.h"
#include "cuda/kernels/dropout.h"
#include "ops/dropout.h"

namespace mnemo::cuda {
namespace {

void dropout_k(const KernelContext& c) {  // (x, step) -> y; (dy, step) -> dx
  const auto& p = c.p<ops::DropoutParams>();
  MNEMO_CHECK(c.in[0].dtype() == DType::f32) << "dropout on CUDA: float32 only, got " << c.in[0].type.str();
  const float pf = static_cast<float>(p.p);
  dropout_forward(context_of(c).stream, c.in[0].as<float>(), c.in[1].as<int32_t>(), c.out[0].as<float>(),
                  c.out[0].numel(), pf, 1.0f / (1.0f - pf), static_cast<uint64_t>(p.seed),
                  static_cast<uint64_t>(p.offset));
}

}  // namespace
}  // namespace mnemo::cuda

MNEMO_REGISTER_CUDA_OPS(dropout) {
  using namespace mnemo::cuda;
  table.add("dropout", {dropout_k});
  table.add("dropout_grad", {dropout_k});
}
