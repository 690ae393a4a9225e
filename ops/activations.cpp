// Pointwise activations and their backward ops. Backward reads the forward *output* y, not the
// input (minimal dependencies: the input buffer can be reused once y exists).
//   relu:    y = max(x, 0)          relu_grad(y, dy):    dx = y <= 0 ? 0 : dy
//            (NaN propagates as in PyTorch: relu(NaN) = NaN, and its gradient passes dy through)
//   sigmoid: y = 1 / (1 + e^-x)     sigmoid_grad(y, dy): dx = dy * y * (1 - y)
//   tanh:    y = tanh(x)            tanh_grad(y, dy):    dx = dy * (1 - y^2)
//   clip{min, max}: y = min(max(x, min), max) (PyTorch's hardtanh; relu6 is clip{0, 6}; NaN propagates)
//            clip_grad{min, max}(y, dy): dx = (y <= min || y >= max) ? 0 : dy, i.e. zero where x was
//            clipped or on the bounds, as hardtanh_backward (y reaches a bound exactly when x does)
// All run in place (x -> y, dy -> dx).
#include <limits>

#include "ops/activations.h"
#include "ops/common.h"

namespace mnemo::ops {
namespace {

struct Relu {
  template <class T> static T f(T x) { return x < T(0) ? T(0) : x; }  // NaN -> NaN (x > 0 ? x : 0 would hide it)
  template <class T> static T df(T y, T dy) { return y <= T(0) ? T(0) : dy; }
  static constexpr bool kCheap = true;
};
// sigmoid and tanh run as Eigen's vectorised array functions (`vec`): for float32 rational
// approximations within a few ulp of the exact values, several times faster than scalar
// std::exp / std::tanh; f stays the scalar definition.
struct Sigmoid {
  template <class T> static T f(T x) { return T(1) / (T(1) + std::exp(-x)); }
  template <class X> static auto vec(const X& x) { return x.logistic(); }
  template <class T> static T df(T y, T dy) { return dy * y * (T(1) - y); }
  static constexpr bool kCheap = false;  // exp per element: not dropped by drop-bn-relu
};
struct Tanh {
  template <class T> static T f(T x) { return std::tanh(x); }
  template <class X> static auto vec(const X& x) { return x.tanh(); }
  template <class T> static T df(T y, T dy) { return dy * (T(1) - y * y); }
  static constexpr bool kCheap = false;
};

template <class A>
void forward_cpu(const KernelContext& c) {
  dispatch_float(c.in[0].dtype(), "activation", [&]<class T>() {
    const T* x = c.in[0].as<T>();
    T* y = c.out[0].as<T>();
    parallel_range(c.out[0].numel(), [&](int64_t b, int64_t e) {
      if constexpr (requires { A::vec(Eigen::ArrayXf()); }) {
        vectorized_map(x + b, y + b, e - b, [](const auto& v) { return A::vec(v); });
      } else {
        for (int64_t i = b; i < e; ++i) y[i] = A::f(x[i]);
      }
    });
  });
}

template <class A>
void backward_cpu(const KernelContext& c) {  // in: y, dy  out: dx
  dispatch_float(c.in[0].dtype(), "activation_grad", [&]<class T>() {
    const T* y = c.in[0].as<T>();
    const T* dy = c.in[1].as<T>();
    T* dx = c.out[0].as<T>();
    parallel_range(c.out[0].numel(), [&](int64_t b, int64_t e) {
      for (int64_t i = b; i < e; ++i) dx[i] = A::df(y[i], dy[i]);
    });
  });
}

template <class A>
void register_activation(OpRegistry& registry, const std::string& name, const std::string& doc,
                         double flops) {
  const std::string grad_name = name + "_grad";
  {
    OpDef d;
    d.name = name;
    d.doc = doc;
    d.min_inputs = d.max_inputs = 1;
    d.infer = infer_like_input();
    d.grad = [grad_name](Graph& g, const GradContext& c) -> std::vector<std::optional<EntryRef>> {
      return {g.add1(grad_name, {c.outputs[0], *c.dout[0]})};
    };
    d.inplace = {{0, 0}};
    d.traits.elementwise = true;
    d.traits.cheap_recompute = A::kCheap;
    d.cost = elementwise_cost(flops);
    d.cpu = forward_cpu<A>;
    d.sample = OpSample{{}, {TensorType{DType::f32, {3, 4, 5}}}};
    registry.add(std::move(d));
  }
  {
    OpDef d;
    d.name = grad_name;
    d.doc = "backward of " + name + ": dx from (y, dy)";
    d.min_inputs = d.max_inputs = 2;
    d.infer = infer_like_input();
    d.inplace = {{1, 0}};
    d.traits.elementwise = true;
    d.cost = elementwise_cost(2);
    d.cpu = backward_cpu<A>;
    d.sample = OpSample{{}, {TensorType{DType::f32, {3, 4, 5}}, TensorType{DType::f32, {3, 4, 5}}}};
    registry.add(std::move(d));
  }
}

ClipParams parse_clip(AttrReader& r) {
  ClipParams p;
  p.lo = r.get_float("min", -std::numeric_limits<double>::infinity());
  p.hi = r.get_float("max", std::numeric_limits<double>::infinity());
  MNEMO_CHECK(!std::isnan(p.lo) && !std::isnan(p.hi) && p.lo < p.hi)
      << "clip needs min < max, got min " << p.lo << ", max " << p.hi;
  return p;
}

template <class T>
T clip_f(T x, T lo, T hi) { return x < lo ? lo : (x > hi ? hi : x); }  // NaN -> NaN
template <class T>
T clip_df(T y, T dy, T lo, T hi) { return (y <= lo || y >= hi) ? T(0) : dy; }

void clip_cpu(const KernelContext& c) {
  const ClipParams& p = c.p<ClipParams>();
  dispatch_float(c.in[0].dtype(), "clip", [&]<class T>() {
    const T* x = c.in[0].as<T>();
    T* y = c.out[0].as<T>();
    const T lo = static_cast<T>(p.lo), hi = static_cast<T>(p.hi);
    parallel_range(c.out[0].numel(), [&](int64_t b, int64_t e) {
      for (int64_t i = b; i < e; ++i) y[i] = clip_f(x[i], lo, hi);
    });
  });
}

void clip_grad_cpu(const KernelContext& c) {  // in: y, dy  out: dx
  const ClipParams& p = c.p<ClipParams>();
  dispatch_float(c.in[0].dtype(), "clip_grad", [&]<class T>() {
    const T* y = c.in[0].as<T>();
    const T* dy = c.in[1].as<T>();
    T* dx = c.out[0].as<T>();
    const T lo = static_cast<T>(p.lo), hi = static_cast<T>(p.hi);
    parallel_range(c.out[0].numel(), [&](int64_t b, int64_t e) {
      for (int64_t i = b; i < e; ++i) dx[i] = clip_df(y[i], dy[i], lo, hi);
    });
  });
}

void register_clip(OpRegistry& registry) {
  const Attrs sample_attrs{{"min", -0.5}, {"max", 0.75}};
  {
    OpDef d;
    d.name = "clip";
    d.doc = "y = min(max(x, min), max); attrs min, max (defaults -inf, inf; relu6 is min 0, max 6)";
    d.min_inputs = d.max_inputs = 1;
    d.parse = parse_with(parse_clip, "clip");
    d.infer = infer_like_input();
    d.grad = [](Graph& g, const GradContext& c) -> std::vector<std::optional<EntryRef>> {
      const ClipParams& p = c.p<ClipParams>();
      return {g.add1("clip_grad", {c.outputs[0], *c.dout[0]}, {{"min", p.lo}, {"max", p.hi}})};
    };
    d.inplace = {{0, 0}};
    d.traits.elementwise = true;
    d.traits.cheap_recompute = true;
    d.cost = elementwise_cost(2);
    d.cpu = clip_cpu;
    d.sample = OpSample{sample_attrs, {TensorType{DType::f32, {3, 4, 5}}}};
    registry.add(std::move(d));
  }
  {
    OpDef d;
    d.name = "clip_grad";
    d.doc = "backward of clip: dx = dy where min < y < max, else 0; attrs as clip";
    d.min_inputs = d.max_inputs = 2;
    d.parse = parse_with(parse_clip, "clip_grad");
    d.infer = infer_like_input();
    d.inplace = {{1, 0}};
    d.traits.elementwise = true;
    d.cost = elementwise_cost(2);
    d.cpu = clip_grad_cpu;
    d.sample = OpSample{sample_attrs, {TensorType{DType::f32, {3, 4, 5}}, TensorType{DType::f32, {3, 4, 5}}}};
    registry.add(std::move(d));
  }
}

}  // namespace
}  // namespace mnemo::ops

MNEMO_REGISTER_OPS(activations) {
  using namespace mnemo::ops;
  register_activation<Relu>(registry, "relu", "y = max(x, 0)", 1);
  register_activation<Sigmoid>(registry, "sigmoid", "y = 1 / (1 + exp(-x))", 4);
  register_activation<Tanh>(registry, "tanh", "y = tanh(x)", 4);
  register_clip(registry);
}
