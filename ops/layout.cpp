// Channel-blocked activations (oneDNN's nChw8c / nChw16c): x[N,C,H,W] stored as [N,C/b,H,W,b],
// channel c = cb*b + j at [n, cb, h, w, j]. conv2d and batch_norm take such tensors when their
// `block` attribute is b (ops/conv2d.h, ops/batch_norm.h), so a CNN kept in this layout between
// its convolutions runs oneDNN's blocked kernels with no reorder before and after each one
// (docs/DESIGN.md "Blocked layout"). These two ops enter and leave the layout; each is the
// other's gradient. Pure permutations (bitwise copies), any float dtype, any trailing rank >= 3.
//   to_blocked{block}(x[N,C,d...]) -> y[N,C/b,d...,b]   (C a multiple of b)
//   to_plain(y[N,C/b,d...,b]) -> x[N,C,d...]
#include "ops/common.h"

namespace mnemo::ops {
namespace {

struct BlockParams {
  int64_t block = 8;
};

BlockParams parse_block(AttrReader& r) { return {parse_block_attr(r, true)}; }

std::vector<TensorType> infer_to_blocked(const void* params, std::span<const TensorType> in) {
  const int64_t b = static_cast<const BlockParams*>(params)->block;
  const TensorType& x = in[0];
  require_float(x, "x");
  MNEMO_CHECK(x.shape.size() >= 3) << "to_blocked: x must be [N,C,H,W] (rank >= 3), got " << x.str();
  MNEMO_CHECK(x.shape[1] % b == 0) << "to_blocked: x " << x.str() << " has C=" << x.shape[1]
                                   << " channels, not a multiple of the block " << b;
  return {TensorType{x.dtype, blocked_shape(x.shape, b)}};
}

std::vector<TensorType> infer_to_plain(const void*, std::span<const TensorType> in) {
  const TensorType& y = in[0];
  require_float(y, "x");
  MNEMO_CHECK(y.shape.size() >= 4 && is_channel_block(y.shape.back()))
      << "to_plain: x must be channel-blocked [N,C/b,H,W,b] with b 8 or 16, got " << y.str();
  return {TensorType{y.dtype, plain_shape(y.shape)}};
}

// plain [N, C, L] <-> blocked [N, C/b, L, b]; one task per (n, cb) slab of L*b elements.
template <bool kToBlocked>
void permute(const KernelContext& c, int64_t b) {
  const Shape& ps = kToBlocked ? c.in[0].shape() : c.out[0].shape();  // the plain shape
  int64_t L = 1;
  for (size_t i = 2; i < ps.size(); ++i) L *= ps[i];
  const int64_t N = ps[0], CB = ps[1] / b;
  dispatch_float(c.in[0].dtype(), kToBlocked ? "to_blocked" : "to_plain", [&]<class T>() {
    const T* s = c.in[0].as<T>();
    T* d = c.out[0].as<T>();
    auto slab = [&](int64_t k) {  // k = n*CB + cb: plain rows [k*b, k*b + b) of length L
      for (int64_t j = 0; j < b; ++j) {
        const int64_t row = (k * b + j) * L;
        for (int64_t i = 0; i < L; ++i) {
          if constexpr (kToBlocked)
            d[(k * L + i) * b + j] = s[row + i];
          else
            d[row + i] = s[(k * L + i) * b + j];
        }
      }
    };
    if (N * CB * L * b < kParallelGrain)
      for (int64_t k = 0; k < N * CB; ++k) slab(k);
    else
      parallel_for(N * CB, slab);
  });
}

void to_blocked_cpu(const KernelContext& c) { permute<true>(c, c.p<BlockParams>().block); }
void to_plain_cpu(const KernelContext& c) { permute<false>(c, c.in[0].shape().back()); }

std::vector<std::optional<EntryRef>> grad_to_blocked(Graph& g, const GradContext& c) {
  if (!c.dout[0]) return {std::nullopt};
  return {g.add1("to_plain", {*c.dout[0]})};
}
std::vector<std::optional<EntryRef>> grad_to_plain(Graph& g, const GradContext& c) {
  if (!c.dout[0]) return {std::nullopt};
  return {g.add1("to_blocked", {*c.dout[0]}, {{"block", g.type(c.inputs[0]).shape.back()}})};
}

}  // namespace
}  // namespace mnemo::ops

MNEMO_REGISTER_OPS(layout) {
  using namespace mnemo;
  using namespace mnemo::ops;
  {
    OpDef d;
    d.name = "to_blocked";
    d.doc = "y[N,C/b,H,W,b] = x[N,C,H,W] in oneDNN's channel-blocked layout (block b = 8 or 16)";
    d.min_inputs = d.max_inputs = 1;
    d.parse = parse_with(parse_block, "to_blocked");
    d.infer = infer_to_blocked;
    d.grad = grad_to_blocked;
    d.cpu = to_blocked_cpu;
    d.backends.cuda = false;  // the blocked layout is oneDNN's (CPU); cuDNN runs plain nchw
    d.sample = OpSample{{{"block", int64_t{8}}}, {TensorType{DType::f32, {2, 16, 3, 5}}}};
    registry.add(std::move(d));
  }
  {
    OpDef d;
    d.name = "to_plain";
    d.doc = "x[N,C,H,W] = y[N,C/b,H,W,b] back from the channel-blocked layout";
    d.min_inputs = d.max_inputs = 1;
    d.infer = infer_to_plain;
    d.grad = grad_to_plain;
    d.cpu = to_plain_cpu;
    d.backends.cuda = false;
    d.sample = OpSample{{}, {TensorType{DType::f32, {2, 2, 3, 5, 8}}}};
    registry.add(std::move(d));
  }
}
