// Dropout in training mode (PyTorch's nn.Dropout): each element is zeroed with probability p and
// the kept ones scaled by 1 / (1 - p).
//   dropout{p, seed, offset}(x, step) -> y[i] = keep(offset + i) ? x[i] * s : 0,      s = 1 / (1 - p)
//   dropout_grad{p, seed, offset}(dy, step) -> dx[i] = keep(offset + i) ? dy[i] * s : 0
// step is an int32 [1] tensor (the training step, bound by the trainer to the graph input
// "rng/step"); keep(i) = dropout::keep(seed, step, i, p) (cuda/kernels/dropout_math.h), a
// counter-based hash: the backward op and any recomputation of the forward op derive the same mask
// from (seed, step) without storing it, so every memory mode stays bitwise identical and the
// backward reads neither x nor y. The masks differ from PyTorch's random stream (same law).
// Both run in place (x -> y, dy -> dx).
#include "cuda/kernels/dropout_math.h"
#include "ops/common.h"
#include "ops/dropout.h"

namespace mnemo::ops {
namespace {

DropoutParams parse_dropout(AttrReader& r) {
  DropoutParams p;
  p.p = r.get_float("p", 0.5);
  p.seed = r.get_int("seed", 0);
  p.offset = r.get_int("offset", 0);
  MNEMO_CHECK(p.offset >= 0) << "dropout offset must be >= 0, got " << p.offset;
  MNEMO_CHECK(p.p >= 0 && p.p < 1) << "dropout probability p must be in [0, 1), got " << p.p;
  return p;
}

std::vector<TensorType> infer_dropout(const void*, std::span<const TensorType> in) {
  require_float(in[0], "x");
  MNEMO_CHECK(in[1].dtype == DType::i32 && in[1].numel() == 1)
      << "dropout: input 1 must be the int32 step counter (one element, the graph input \"rng/step\"), got "
      << in[1].str();
  return {in[0]};
}

template <class T>
void masked_scale(const T* x, T* y, int64_t n, const DropoutParams& p, int32_t step) {
  const float pf = static_cast<float>(p.p);
  const T s = T(1) / (T(1) - static_cast<T>(pf));
  const uint64_t seed = static_cast<uint64_t>(p.seed), st = static_cast<uint64_t>(static_cast<uint32_t>(step));
  const uint64_t at = static_cast<uint64_t>(p.offset);
  parallel_range(n, [&](int64_t b, int64_t e) {
    for (int64_t i = b; i < e; ++i)
      y[i] = dropout::keep(seed, st, at + static_cast<uint64_t>(i), pf) ? x[i] * s : T(0);
  });
}

void dropout_cpu(const KernelContext& c) {  // (x, step) -> y; (dy, step) -> dx
  const DropoutParams& p = c.p<DropoutParams>();
  const int32_t step = c.in[1].as<int32_t>()[0];
  dispatch_float(c.in[0].dtype(), "dropout", [&]<class T>() {
    masked_scale(c.in[0].as<T>(), c.out[0].as<T>(), c.out[0].numel(), p, step);
  });
}

OpDef dropout_op(const std::string& name, const std::string& doc) {
  OpDef d;
  d.name = name;
  d.doc = doc;
  d.min_inputs = d.max_inputs = 2;
  d.parse = parse_with(parse_dropout, name);
  d.infer = infer_dropout;
  d.inplace = {{0, 0}};
  d.traits.elementwise = true;
  d.cost = [](const void*, std::span<const TensorType> in, std::span<const TensorType> out) {
    return Cost{2.0 * static_cast<double>(out[0].numel()), io_bytes(in, out)};
  };
  d.cpu = dropout_cpu;
  d.sample = OpSample{{{"p", 0.3}, {"seed", int64_t{7}}, {"offset", int64_t{13}}}, {TensorType{DType::f32, {3, 4, 5}}, TensorType{DType::i32, {1}}}};
  d.sample->int_high = 1000;
  return d;
}

}  // namespace
}  // namespace mnemo::ops

MNEMO_REGISTER_OPS(dropout) {
  using namespace mnemo;
  using namespace mnemo::ops;
  OpDef d = dropout_op("dropout", "y = x * keep / (1 - p), keep ~ Bernoulli(1 - p) from (seed, step, index); inputs x, step");
  d.grad = [](Graph& g, const GradContext& c) -> std::vector<std::optional<EntryRef>> {
    if (!c.dout[0]) return {std::nullopt, std::nullopt};
    const DropoutParams& p = c.p<DropoutParams>();
    return {g.add1("dropout_grad", {*c.dout[0], c.inputs[1]}, {{"p", p.p}, {"seed", p.seed}, {"offset", p.offset}}), std::nullopt};
  };
  registry.add(std::move(d));
  registry.add(dropout_op("dropout_grad", "backward of dropout: dx = dy * keep / (1 - p), the forward's mask; inputs dy, step"));
}
