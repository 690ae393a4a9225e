// The optimiser update as ops inside the training graph (autograd/update.cpp places them): one
// sgd_update per trainable parameter right after the last node reading the parameter or its
// gradient, so every device runs the same planned step, update included.
//   finite_check(x) -> status int32[1]:  0 when every element of x is finite, else -1
//   sgd_update(w, g, v, lr float32[1] (or w's dtype), status) -> (w', v', status'):
//     v'' = momentum * v + (g + weight_decay * w);  w'' = w - lr * v''
//     (PyTorch's SGD with momentum and weight decay; v starts at zero);
//     status' = status, or `index` when status is 0 and g, v'' or w'' holds a NaN or Inf (an
//     overflow in the update itself counts: a weight never becomes Inf silently);
//     w', v' = w'', v'' when status' == 0, else w, v unchanged (checked in a first pass, written
//     in a second, so a refused update leaves no partial write).
//   assign(dst, value, status) -> dst':  dst' = value when status is 0, else dst (the BatchNorm
//     running statistics of a step that failed are not taken over).
//   w' and v' are w's and v's memory (OpDef::updates: parameters and optimiser state, updated in
//   place); status' may run in place on status, so the updates of a step chain one status word
//   that the trainer reads after the step: a non-finite loss or gradient never reaches a weight
//   unnoticed, and no update after the first non-finite gradient is applied.
#include "ops/optimizer.h"

#include <cstring>

#include "ops/common.h"

namespace mnemo::ops {
namespace {

const TensorType kStatus{DType::i32, {1}};
const TensorType kLr{DType::f32, {1}};

SgdParams parse_sgd(AttrReader& r) {
  SgdParams p;
  p.momentum = r.get_float("momentum", 0.9);
  p.weight_decay = r.get_float("weight_decay", 0.0);
  p.index = r.get_int("index", 1);
  MNEMO_CHECK(p.momentum >= 0) << "momentum must be >= 0, got " << p.momentum;
  MNEMO_CHECK(p.weight_decay >= 0) << "weight_decay must be >= 0, got " << p.weight_decay;
  MNEMO_CHECK(p.index >= 1 && p.index <= INT32_MAX) << "index must be in [1, 2^31), got " << p.index;
  return p;
}

std::vector<TensorType> infer_sgd(const void*, std::span<const TensorType> in) {
  require_float(in[0], "w");
  require_same(in[0], in[1], "w and its gradient g");
  require_same(in[0], in[2], "w and its velocity v");
  MNEMO_CHECK(in[3] == kLr || in[3] == (TensorType{in[0].dtype, {1}}))
      << "the learning rate must be " << kLr.str() << " (or of w's dtype), got " << in[3].str();
  MNEMO_CHECK(in[4] == kStatus) << "the status must be " << kStatus.str() << ", got " << in[4].str();
  return {in[0], in[0], kStatus};
}

// Whether f(i) is finite for every i in [0, n); chunks over threads, combined in order.
template <class F>
bool all_finite_by(int64_t n, F&& f) {
  const int threads = omp_get_max_threads();
  std::vector<char> bad(static_cast<size_t>(threads), 0);
  parallel_range(n, [&](int64_t b, int64_t e) {
    bool any = false;
    for (int64_t i = b; i < e; ++i) any |= !f(i);
    if (any) bad[static_cast<size_t>(omp_in_parallel() ? omp_get_thread_num() : 0)] = 1;
  });
  for (char c : bad)
    if (c) return false;
  return true;
}
template <class T>
bool all_finite(const T* x, int64_t n) {
  return all_finite_by(n, [x](int64_t i) { return std::isfinite(x[i]); });
}

void sgd_cpu(const KernelContext& c) {  // in: w, g, v, lr, status  out: w', v', status'
  const SgdParams& p = c.p<SgdParams>();
  const int32_t status_in = c.in[4].as<int32_t>()[0];
  int32_t status = status_in;
  dispatch_float(c.in[0].dtype(), "sgd_update", [&]<class T>() {
    const T* w = c.in[0].as<T>();
    const T* g = c.in[1].as<T>();
    const T* v = c.in[2].as<T>();
    T* wo = c.out[0].as<T>();
    T* vo = c.out[1].as<T>();
    const int64_t n = c.in[0].numel();
    const T mom = static_cast<T>(p.momentum), wd = static_cast<T>(p.weight_decay);
    const T a = c.in[3].dtype() == DType::f64 ? static_cast<T>(c.in[3].as<double>()[0]) : static_cast<T>(c.in[3].as<float>()[0]);
    // One formula for the check and the write, so both see the same bits.
    auto velocity = [&](int64_t i) { return mom * v[i] + (g[i] + wd * w[i]); };
    if (status == 0 && !all_finite_by(n, [&](int64_t i) {
          const T vi = velocity(i);
          return std::isfinite(g[i]) && std::isfinite(vi) && std::isfinite(w[i] - a * vi);
        }))
      status = static_cast<int32_t>(p.index);
    if (status != 0) {  // a failed step: leave w and v as they are (out aliases in)
      if (wo != w) std::copy(w, w + n, wo);
      if (vo != v) std::copy(v, v + n, vo);
      return;
    }
    parallel_range(n, [&](int64_t b, int64_t e) {
      for (int64_t i = b; i < e; ++i) {
        const T vi = velocity(i);
        vo[i] = vi;
        wo[i] = w[i] - a * vi;
      }
    });
  });
  c.out[2].as<int32_t>()[0] = status;
}

void assign_cpu(const KernelContext& c) {  // in: dst, value, status  out: dst' (dst's memory)
  const TensorView& src = c.in[c.in[2].as<int32_t>()[0] == 0 ? 1 : 0];
  if (c.out[0].data != src.data) std::memcpy(c.out[0].data, src.data, c.out[0].bytes());
}

void finite_check_cpu(const KernelContext& c) {  // in: x  out: status
  bool ok = true;
  dispatch_float(c.in[0].dtype(), "finite_check", [&]<class T>() { ok = all_finite(c.in[0].as<T>(), c.in[0].numel()); });
  c.out[0].as<int32_t>()[0] = ok ? 0 : -1;
}

}  // namespace
}  // namespace mnemo::ops

MNEMO_REGISTER_OPS(optimizer) {
  using namespace mnemo;
  using namespace mnemo::ops;
  {
    OpDef d;
    d.name = "sgd_update";
    d.doc = "SGD with momentum and weight decay on w and v in place, unless the status or g is not finite";
    d.min_inputs = d.max_inputs = 5;
    d.parse = parse_with(parse_sgd, "sgd_update");
    d.infer = infer_sgd;
    d.updates = {{0, 0}, {2, 1}};
    d.inplace = {{4, 2}};
    d.traits.updates_state = true;
    d.cost = [](const void*, std::span<const TensorType> in, std::span<const TensorType> out) {
      return Cost{5.0 * static_cast<double>(in[0].numel()), 5.0 * static_cast<double>(in[0].bytes())};
    };
    d.cpu = sgd_cpu;
    const TensorType t{DType::f32, {7, 5}};
    d.sample = OpSample{{{"momentum", 0.9}, {"weight_decay", 1e-4}, {"index", 3}}, {t, t, t, kLr, kStatus}, 1};
    registry.add(std::move(d));
  }
  {
    OpDef d;
    d.name = "assign";
    d.doc = "dst = value when the status is 0 (a state update of a step that succeeded), in place";
    d.min_inputs = d.max_inputs = 3;
    d.infer = [](const void*, std::span<const TensorType> in) -> std::vector<TensorType> {
      require_same(in[0], in[1], "dst and value");
      MNEMO_CHECK(in[2] == kStatus) << "the status must be " << kStatus.str() << ", got " << in[2].str();
      return {in[0]};
    };
    d.updates = {{0, 0}};
    d.traits.updates_state = true;
    d.cpu = assign_cpu;
    const TensorType t{DType::f32, {6}};
    d.sample = OpSample{{}, {t, t, kStatus}, 1};
    registry.add(std::move(d));
  }
  {
    OpDef d;
    d.name = "finite_check";
    d.traits.step_machinery = true;
    d.doc = "status int32[1]: 0 when every element of x is finite, else -1";
    d.min_inputs = d.max_inputs = 1;
    d.infer = [](const void*, std::span<const TensorType> in) -> std::vector<TensorType> {
      require_float(in[0], "x");
      return {kStatus};
    };
    d.traits.reduction = true;
    d.cost = [](const void*, std::span<const TensorType> in, std::span<const TensorType> out) {
      return Cost{static_cast<double>(in[0].numel()), io_bytes(in, out)};
    };
    d.cpu = finite_check_cpu;
    d.sample = OpSample{{}, {TensorType{DType::f32, {3, 4}}}};
    registry.add(std::move(d));
  }
}
