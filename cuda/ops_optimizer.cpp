// CUDA kernels of the optimiser ops (ops/optimizer.cpp): sgd_update (in: w, g, v, lr, status;
// out: w', v' in place on w, v; status'), finite_check (x -> status) and assign (the running
// statistics of a step whose status is 0), float32.
#include "cuda/context.h"
#include "cuda/kernels/optimizer.h"
#include "ops/optimizer.h"

namespace mnemo::cuda {
namespace {

void sgd_k(const KernelContext& c) {
  const auto& p = c.p<ops::SgdParams>();
  MNEMO_CHECK(c.in[0].dtype() == DType::f32) << "sgd_update on CUDA: float32 only, got " << c.in[0].type.str();
  sgd_update(context_of(c).stream, c.in[0].as<float>(), c.in[1].as<float>(), c.in[2].as<float>(), c.in[3].as<float>(),
             c.in[4].as<int32_t>(), c.out[0].as<float>(), c.out[1].as<float>(), c.out[2].as<int32_t>(), c.in[0].numel(),
             static_cast<float>(p.momentum), static_cast<float>(p.weight_decay), static_cast<int32_t>(p.index));
}

void assign_k(const KernelContext& c) {  // in: dst, value, status  out: dst' (dst's memory)
  MNEMO_CHECK(c.in[0].bytes() % 4 == 0) << "assign on CUDA: 4-byte elements only, got " << c.in[0].type.str();
  assign_if_ok(context_of(c).stream, c.in[1].data, c.out[0].data, static_cast<int64_t>(c.out[0].bytes()), c.in[2].as<int32_t>());
}

void finite_check_k(const KernelContext& c) {
  MNEMO_CHECK(c.in[0].dtype() == DType::f32) << "finite_check on CUDA: float32 only, got " << c.in[0].type.str();
  finite_check(context_of(c).stream, c.in[0].as<float>(), c.in[0].numel(), c.out[0].as<int32_t>());
}

}  // namespace
}  // namespace mnemo::cuda

MNEMO_REGISTER_CUDA_OPS(optimizer) {
  using namespace mnemo::cuda;
  table.add("sgd_update", {sgd_k});
  table.add("finite_check", {finite_check_k});
  table.add("assign", {assign_k});
}
