// Elementwise arithmetic on tensors of one type (any shape, no broadcasting), copies and identity.
//   add(a, b)          y = a + b           grad: da = dy, db = dy (no node)
//   mul(a, b)          y = a * b           grad: da = mul(dy, b), db = mul(dy, a)
//   add_n(x1..xk)      y = ((x1 + x2) + ...) + xk, k >= 1, summed in input order (deterministic)
//                                          grad: every xi gets dy
//   copy(x)            y = x (a new buffer)  grad: dy
//   identity(x)        y aliases x (view: no kernel, no memory)  grad: dy
// add, mul and add_n run in place on their first input (mul and add also on the second).
#include <cstring>

#include "ops/common.h"

namespace mnemo::ops {
namespace {

// Inference: every input float and of exactly the type of the first (no broadcasting).
InferFn infer_same(const char* op) {
  return [op](const void*, std::span<const TensorType> in) -> std::vector<TensorType> {
    MNEMO_CHECK(is_float(in[0].dtype)) << op << ": inputs must be float32 or float64, got " << in[0].str();
    for (size_t i = 1; i < in.size(); ++i)
      MNEMO_CHECK(in[i] == in[0]) << op << ": input " << i << " has type " << in[i].str() << ", expected "
                                  << in[0].str() << " like input 0 (no broadcasting: shapes and dtypes must match)";
    return {in[0]};
  };
}

struct Add {
  template <class T> static T f(T a, T b) { return a + b; }
};
struct Mul {
  template <class T> static T f(T a, T b) { return a * b; }
};

template <class F>
void binary_cpu(const KernelContext& c) {
  dispatch_float(c.in[0].dtype(), "elementwise", [&]<class T>() {
    const T* a = c.in[0].as<T>();
    const T* b = c.in[1].as<T>();
    T* y = c.out[0].as<T>();
    parallel_range(c.out[0].numel(), [&](int64_t lo, int64_t hi) {
      for (int64_t i = lo; i < hi; ++i) y[i] = F::f(a[i], b[i]);
    });
  });
}

// y may alias x1: element i of x1 is read before y[i] is written.
void add_n_cpu(const KernelContext& c) {
  dispatch_float(c.in[0].dtype(), "add_n", [&]<class T>() {
    const size_t k = c.in.size();
    std::vector<const T*> x(k);
    for (size_t j = 0; j < k; ++j) x[j] = c.in[j].as<T>();
    T* y = c.out[0].as<T>();
    parallel_range(c.out[0].numel(), [&](int64_t lo, int64_t hi) {
      constexpr int64_t kBlock = 1024;  // sum block by block to keep the partial sums in cache
      for (int64_t b = lo; b < hi; b += kBlock) {
        const int64_t e = std::min(hi, b + kBlock);
        if (y != x[0])
          for (int64_t i = b; i < e; ++i) y[i] = x[0][i];
        for (size_t j = 1; j < k; ++j)
          for (int64_t i = b; i < e; ++i) y[i] += x[j][i];
      }
    });
  });
}

void copy_cpu(const KernelContext& c) {
  const char* x = static_cast<const char*>(c.in[0].data);
  char* y = static_cast<char*>(c.out[0].data);
  parallel_range(static_cast<int64_t>(c.out[0].bytes()), [&](int64_t lo, int64_t hi) {
    std::memcpy(y + lo, x + lo, static_cast<size_t>(hi - lo));
  });
}

std::vector<TensorType> infer_any(const void*, std::span<const TensorType> in) { return {in[0]}; }

// grad returning dy for every input (add, add_n, copy, identity).
std::vector<std::optional<EntryRef>> pass_through(Graph&, const GradContext& c) {
  return std::vector<std::optional<EntryRef>>(c.inputs.size(), c.dout[0]);
}

const TensorType kSample{DType::f32, {3, 4, 5}};

}  // namespace
}  // namespace mnemo::ops

MNEMO_REGISTER_OPS(elementwise) {
  using namespace mnemo;
  using namespace mnemo::ops;
  {
    OpDef d;
    d.name = "add";
    d.traits.elementwise = true;
    d.doc = "y = a + b (same types, no broadcasting)";
    d.min_inputs = d.max_inputs = 2;
    d.infer = infer_same("add");
    d.grad = pass_through;
    d.inplace = {{0, 0}, {1, 0}};
    d.cost = elementwise_cost(1);
    d.cpu = binary_cpu<Add>;
    d.sample = OpSample{{}, {kSample, kSample}};
    registry.add(std::move(d));
  }
  {
    OpDef d;
    d.name = "mul";
    d.traits.elementwise = true;
    d.doc = "y = a * b elementwise (same types, no broadcasting)";
    d.min_inputs = d.max_inputs = 2;
    d.infer = infer_same("mul");
    d.grad = [](Graph& g, const GradContext& c) -> std::vector<std::optional<EntryRef>> {
      const EntryRef dy = *c.dout[0];
      return {g.add1("mul", {dy, c.inputs[1]}), g.add1("mul", {dy, c.inputs[0]})};
    };
    d.inplace = {{0, 0}, {1, 0}};
    d.cost = elementwise_cost(1);
    d.cpu = binary_cpu<Mul>;
    d.sample = OpSample{{}, {kSample, kSample}};
    registry.add(std::move(d));
  }
  {
    OpDef d;
    d.name = "add_n";
    d.traits.elementwise = true;
    d.doc = "y = x1 + ... + xk, summed in input order (k >= 1, same types)";
    d.min_inputs = 1;
    d.max_inputs = -1;
    d.infer = infer_same("add_n");
    d.grad = pass_through;
    d.inplace = {{0, 0}};
    d.cost = [](const void*, std::span<const TensorType> in, std::span<const TensorType> out) {
      return Cost{static_cast<double>(in.size() - 1) * static_cast<double>(out[0].numel()), io_bytes(in, out)};
    };
    d.cpu = add_n_cpu;
    d.sample = OpSample{{}, {kSample, kSample, kSample}};
    registry.add(std::move(d));
  }
  {
    OpDef d;
    d.name = "copy";
    d.traits.elementwise = true;
    d.doc = "y = x in a buffer of its own";
    d.min_inputs = d.max_inputs = 1;
    d.infer = infer_any;
    d.grad = pass_through;
    d.cost = elementwise_cost(0);
    d.cpu = copy_cpu;
    d.sample = OpSample{{}, {kSample}};
    registry.add(std::move(d));
  }
  {
    OpDef d;
    d.name = "identity";
    d.traits.elementwise = true;
    d.doc = "y = x (a view: aliases x, no kernel)";
    d.kind = OpKind::view;
    d.min_inputs = d.max_inputs = 1;
    d.infer = infer_any;
    d.grad = pass_through;
    d.cost = [](const void*, std::span<const TensorType>, std::span<const TensorType>) { return Cost{}; };
    d.sample = OpSample{{}, {kSample}};
    registry.add(std::move(d));
  }
}
