// Pointwise activations and their backward ops. Backward reads the forward *output* y, not the
// input (minimal dependencies: the input buffer can be reused once y exists).
//   relu:    y = max(x, 0)          relu_grad(y, dy):    dx = y <= 0 ? 0 : dy
//            (NaN propagates as in PyTorch: relu(NaN) = NaN, and its gradient passes dy through)
//   sigmoid: y = 1 / (1 + e^-x)     sigmoid_grad(y, dy): dx = dy * y * (1 - y)
//   tanh:    y = tanh(x)            tanh_grad(y, dy):    dx = dy * (1 - y^2)
// All run in place (x -> y, dy -> dx).
#include "ops/common.h"

namespace mnemo::ops {
namespace {

struct Relu {
  template <class T> static T f(T x) { return x < T(0) ? T(0) : x; }  // NaN -> NaN (x > 0 ? x : 0 would hide it)
  template <class T> static T df(T y, T dy) { return y <= T(0) ? T(0) : dy; }
  static constexpr bool kCheap = true;
};
struct Sigmoid {
  template <class T> static T f(T x) { return T(1) / (T(1) + std::exp(-x)); }
  template <class T> static T df(T y, T dy) { return dy * y * (T(1) - y); }
  static constexpr bool kCheap = false;  // exp per element: not dropped by drop-bn-relu
};
struct Tanh {
  template <class T> static T f(T x) { return std::tanh(x); }
  template <class T> static T df(T y, T dy) { return dy * (T(1) - y * y); }
  static constexpr bool kCheap = false;
};

template <class A>
void forward_cpu(const KernelContext& c) {
  dispatch_float(c.in[0].dtype(), "activation", [&]<class T>() {
    const T* x = c.in[0].as<T>();
    T* y = c.out[0].as<T>();
    parallel_range(c.out[0].numel(), [&](int64_t b, int64_t e) {
      for (int64_t i = b; i < e; ++i) y[i] = A::f(x[i]);
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

}  // namespace
}  // namespace mnemo::ops

MNEMO_REGISTER_OPS(activations) {
  using namespace mnemo::ops;
  register_activation<Relu>(registry, "relu", "y = max(x, 0)", 1);
  register_activation<Sigmoid>(registry, "sigmoid", "y = 1 / (1 + exp(-x))", 4);
  register_activation<Tanh>(registry, "tanh", "y = tanh(x)", 4);
}
