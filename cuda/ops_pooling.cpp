// CUDA kernels of ops/pooling.cpp: max_pool2d, avg_pool2d, global_avg_pool and their backward ops
// (float32 NCHW; bitwise the CPU's results, see cuda/kernels/pooling_math.h).
#include "cuda/context.h"
#include "cuda/kernels/pooling.h"
#include "ops/pooling.h"

namespace mnemo::cuda {
namespace {

// Geometry of input planes of `x` ([N,C,H,W]) pooled to planes of `y` ([N,C,P,Q]).
pool::Geom geom(const ops::PoolParams& p, const TensorView& x, const TensorView& y) {
  pool::Geom g;
  g.r = p.r, g.s = p.s, g.sh = p.sh, g.sw = p.sw, g.ph = p.ph, g.pw = p.pw;
  g.count_include_pad = p.count_include_pad;
  g.h = x.dim(2), g.w = x.dim(3), g.op = y.dim(2), g.oq = y.dim(3);
  return g;
}
int64_t planes(const TensorView& t) { return t.dim(0) * t.dim(1); }

void max_pool_k(const KernelContext& c) {  // in: x  out: y
  max_pool_forward(context_of(c).stream, geom(c.p<ops::PoolParams>(), c.in[0], c.out[0]), c.in[0].as<float>(),
                   c.out[0].as<float>(), planes(c.in[0]));
}

void max_pool_grad_k(const KernelContext& c) {  // in: x, y, dy  out: dx
  max_pool_backward(context_of(c).stream, geom(c.p<ops::PoolParams>(), c.in[0], c.in[1]), c.in[0].as<float>(),
                    c.in[1].as<float>(), c.in[2].as<float>(), c.out[0].as<float>(), planes(c.in[0]));
}

void avg_pool_k(const KernelContext& c) {  // in: x  out: y
  avg_pool_forward(context_of(c).stream, geom(c.p<ops::PoolParams>(), c.in[0], c.out[0]), c.in[0].as<float>(),
                   c.out[0].as<float>(), planes(c.in[0]));
}

void avg_pool_grad_k(const KernelContext& c) {  // in: dy  out: dx (input_hw)
  avg_pool_backward(context_of(c).stream, geom(c.p<ops::PoolParams>(), c.out[0], c.in[0]), c.in[0].as<float>(),
                    c.out[0].as<float>(), planes(c.out[0]));
}

void global_avg_pool_k(const KernelContext& c) {  // in: x[N,C,H,W]  out: y[N,C]
  global_avg_pool_forward(context_of(c).stream, c.in[0].as<float>(), c.out[0].as<float>(), planes(c.in[0]),
                          c.in[0].dim(2) * c.in[0].dim(3));
}

void global_avg_pool_grad_k(const KernelContext& c) {  // in: dy[N,C]  out: dx[N,C,H,W]
  global_avg_pool_backward(context_of(c).stream, c.in[0].as<float>(), c.out[0].as<float>(), planes(c.out[0]),
                           c.out[0].dim(2) * c.out[0].dim(3));
}

}  // namespace
}  // namespace mnemo::cuda

MNEMO_REGISTER_CUDA_OPS(pooling) {
  using namespace mnemo::cuda;
  table.add("max_pool2d", {max_pool_k});
  table.add("max_pool2d_grad", {max_pool_grad_k});
  table.add("avg_pool2d", {avg_pool_k});
  table.add("avg_pool2d_grad", {avg_pool_grad_k});
  table.add("global_avg_pool", {global_avg_pool_k});
  table.add("global_avg_pool_grad", {global_avg_pool_grad_k});
}
