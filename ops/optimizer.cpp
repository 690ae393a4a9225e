// Optimiser updates as ops, so every backend runs the same update (train/sgd.cpp calls the CPU
// kernel, the CUDA backend its own). Not used inside training graphs: the trainer calls the
// kernel once per trainable parameter after each step, in place.
//   sgd_update(w, g, v) -> (w', v'):  v' = momentum * v + (g + weight_decay * w);  w' = w - lr * v'
//   (PyTorch's SGD with momentum and weight decay; v starts at zero.)
#include "ops/optimizer.h"

#include "ops/common.h"

namespace mnemo::ops {
namespace {

SgdParams parse_sgd(AttrReader& r) {
  SgdParams p;
  p.lr = r.get_float("lr", 0.1);
  p.momentum = r.get_float("momentum", 0.9);
  p.weight_decay = r.get_float("weight_decay", 0.0);
  MNEMO_CHECK(p.momentum >= 0) << "momentum must be >= 0, got " << p.momentum;
  MNEMO_CHECK(p.weight_decay >= 0) << "weight_decay must be >= 0, got " << p.weight_decay;
  return p;
}

std::vector<TensorType> infer_sgd(const void*, std::span<const TensorType> in) {
  require_float(in[0], "w");
  require_same(in[0], in[1], "w and its gradient g");
  require_same(in[0], in[2], "w and its velocity v");
  return {in[0], in[0]};
}

void sgd_cpu(const KernelContext& c) {  // in: w, g, v  out: w', v' (in place allowed)
  const SgdParams& p = c.p<SgdParams>();
  dispatch_float(c.in[0].dtype(), "sgd_update", [&]<class T>() {
    const T* w = c.in[0].as<T>();
    const T* g = c.in[1].as<T>();
    const T* v = c.in[2].as<T>();
    T* wo = c.out[0].as<T>();
    T* vo = c.out[1].as<T>();
    const T mom = static_cast<T>(p.momentum), wd = static_cast<T>(p.weight_decay), a = static_cast<T>(p.lr);
    parallel_range(c.in[0].numel(), [&](int64_t b, int64_t e) {
      for (int64_t i = b; i < e; ++i) {
        const T vi = mom * v[i] + (g[i] + wd * w[i]);
        vo[i] = vi;
        wo[i] = w[i] - a * vi;
      }
    });
  });
}

}  // namespace
}  // namespace mnemo::ops

MNEMO_REGISTER_OPS(optimizer) {
  using namespace mnemo;
  using namespace mnemo::ops;
  OpDef d;
  d.name = "sgd_update";
  d.doc = "SGD with momentum and weight decay, in place: v = m v + (g + wd w); w -= lr v";
  d.min_inputs = d.max_inputs = 3;
  d.parse = parse_with(parse_sgd, "sgd_update");
  d.infer = infer_sgd;
  d.inplace = {{0, 0}, {2, 1}};
  d.cost = [](const void*, std::span<const TensorType> in, std::span<const TensorType> out) {
    return Cost{4.0 * static_cast<double>(in[0].numel()), io_bytes(in, out)};
  };
  d.cpu = sgd_cpu;
  const TensorType t{DType::f32, {7, 5}};
  d.sample = OpSample{{{"lr", 0.05}, {"momentum", 0.9}, {"weight_decay", 1e-4}}, {t, t, t}};
  registry.add(std::move(d));
}
