// Softmax cross-entropy loss over classes, averaged over the batch, and its backward op.
//   softmax_cross_entropy(logits[N,C] float, labels[N] int32) -> loss[] (rank 0)
//       loss = 1/N sum_n ( log sum_c exp(z[n,c] - m_n) + m_n - z[n,label_n] ),  m_n = max_c z[n,c]
//       (log-sum-exp with the row maximum subtracted: finite for logits of any size)
//   softmax_cross_entropy_grad(logits[N,C], labels[N], dloss[]) -> dlogits[N,C]
//       dlogits[n,c] = (softmax(z[n])[c] - [c == label_n]) * dloss / N
// Backward recomputes the softmax from the logits (no probability tensor is kept alive).
// exp is Eigen's vectorised one; the row sums have a fixed order (lane_sum), so results do not
// depend on where the buffers are.
// Labels outside [0, C) are an error naming the batch index. The per-row losses go to the workspace
// and are summed in row order, so the loss does not depend on the thread count.
#include "ops/common.h"

namespace mnemo::ops {
namespace {

void check_inputs(std::span<const TensorType> in, const char* op) {
  const TensorType& z = in[0];
  const TensorType& labels = in[1];
  MNEMO_CHECK(is_float(z.dtype) && z.shape.size() == 2) << op << ": logits must be a float [N,C] matrix, got "
                                                         << z.str();
  MNEMO_CHECK(z.shape[0] >= 1 && z.shape[1] >= 1) << op << ": logits must have N >= 1 and C >= 1, got " << z.str();
  const TensorType want{DType::i32, {z.shape[0]}};
  MNEMO_CHECK(labels == want) << op << ": labels must be " << want.str() << " (one class index per row of logits "
                              << z.str() << "), got " << labels.str();
}

void check_labels(const TensorView& labels, int64_t classes, const char* op) {
  const int32_t* l = labels.as<int32_t>();
  for (int64_t n = 0; n < labels.numel(); ++n)
    MNEMO_CHECK(l[n] >= 0 && l[n] < classes) << op << ": label " << l[n] << " at batch index " << n
                                             << " is outside [0, " << classes << ")";
}

// f(n) for every row; threads only when the work is large enough.
template <class F>
void for_rows(int64_t rows, int64_t cols, F&& f) {
  if (rows * cols < kParallelGrain) {
    for (int64_t n = 0; n < rows; ++n) f(n);
  } else {
    parallel_for(rows, f);
  }
}

// Sum of x[0, n) in a fixed order whatever the address: 8 running sums (lane k takes the
// elements j = k mod 8), then added in lane order. The compiler keeps the lanes in one vector
// register; the result depends only on the values, so every memory mode (different buffer
// addresses) gets the same bits.
template <class T>
T lane_sum(const T* x, int64_t n) {
  T acc[8] = {};
  int64_t j = 0;
  for (; j + 8 <= n; j += 8)
    for (int k = 0; k < 8; ++k) acc[k] += x[j + k];
  for (int k = 0; j < n; ++j, ++k) acc[k] += x[j];
  T s = 0;
  for (int k = 0; k < 8; ++k) s += acc[k];
  return s;
}

// y = exp(x - m) over n elements with Eigen's vectorised exp (y may alias x; every element through
// the packet path: vectorized_map).
template <class T>
void exp_shifted(const T* x, T m, T* y, int64_t n) {
  vectorized_map(x, y, n, [m](const auto& v) { return (v - m).exp(); });
}

template <class T>
T row_max(const T* z, int64_t c) {
  T m = z[0];
  for (int64_t j = 1; j < c; ++j) m = std::max(m, z[j]);
  return m;
}

// Row maximum and sum of exp(z - max), the exponentials through a small buffer.
template <class T>
std::pair<T, T> max_and_sum(const T* z, int64_t c) {
  const T m = row_max(z, c);
  constexpr int64_t kChunk = 1024;
  T buf[kChunk];
  T acc = 0;
  for (int64_t b = 0; b < c; b += kChunk) {
    const int64_t n = std::min(kChunk, c - b);
    exp_shifted(z + b, m, buf, n);
    acc += lane_sum(buf, n);
  }
  return {m, acc};
}

std::vector<TensorType> infer_loss(const void*, std::span<const TensorType> in) {
  check_inputs(in, "softmax_cross_entropy");
  return {TensorType{in[0].dtype, {}}};
}

void loss_cpu(const KernelContext& c) {
  dispatch_float(c.in[0].dtype(), "softmax_cross_entropy", [&]<class T>() {
    const int64_t rows = c.in[0].dim(0), cols = c.in[0].dim(1);
    check_labels(c.in[1], cols, "softmax_cross_entropy");
    MNEMO_CHECK(c.workspace && c.workspace_bytes >= static_cast<size_t>(rows) * sizeof(T))
        << "softmax_cross_entropy: workspace of " << c.workspace_bytes << " bytes, need " << rows * sizeof(T);
    const T* z = c.in[0].as<T>();
    const int32_t* labels = c.in[1].as<int32_t>();
    T* row_loss = static_cast<T*>(c.workspace);
    for_rows(rows, cols, [&](int64_t n) {
      const T* zn = z + n * cols;
      auto [m, s] = max_and_sum(zn, cols);
      row_loss[n] = std::log(s) + m - zn[labels[n]];
    });
    T total = 0;
    for (int64_t n = 0; n < rows; ++n) total += row_loss[n];
    c.out[0].as<T>()[0] = total / static_cast<T>(rows);
  });
}

std::vector<TensorType> infer_grad(const void*, std::span<const TensorType> in) {
  check_inputs(in, "softmax_cross_entropy_grad");
  const TensorType want{in[0].dtype, {}};
  MNEMO_CHECK(in[2] == want) << "softmax_cross_entropy_grad: dloss must be " << want.str() << ", got "
                             << in[2].str();
  return {in[0]};
}

// dz may alias z: each row's maximum is read whole before exp(z - max) overwrites it in place.
void grad_cpu(const KernelContext& c) {
  dispatch_float(c.in[0].dtype(), "softmax_cross_entropy_grad", [&]<class T>() {
    const int64_t rows = c.in[0].dim(0), cols = c.in[0].dim(1);
    check_labels(c.in[1], cols, "softmax_cross_entropy_grad");
    const T* z = c.in[0].as<T>();
    const int32_t* labels = c.in[1].as<int32_t>();
    const T scale = c.in[2].as<T>()[0] / static_cast<T>(rows);
    T* dz = c.out[0].as<T>();
    for_rows(rows, cols, [&](int64_t n) {
      const T* zn = z + n * cols;
      T* dn = dz + n * cols;
      const T m = row_max(zn, cols);
      exp_shifted(zn, m, dn, cols);  // (the whole row's max is read before dn overwrites it)
      const T s = lane_sum(dn, cols);
      const int64_t label = labels[n];
      for (int64_t j = 0; j < cols; ++j) dn[j] = (dn[j] / s - (j == label ? T(1) : T(0))) * scale;
    });
  });
}

}  // namespace
}  // namespace mnemo::ops

MNEMO_REGISTER_OPS(softmax_cross_entropy) {
  using namespace mnemo;
  using namespace mnemo::ops;
  const TensorType logits{DType::f32, {3, 5}}, labels{DType::i32, {3}}, scalar{DType::f32, {}};
  {
    OpDef d;
    d.name = "softmax_cross_entropy";
    d.traits.reduction = true;
    d.doc = "loss = mean over n of -log softmax(logits[n])[labels[n]]";
    d.min_inputs = d.max_inputs = 2;
    d.infer = infer_loss;
    d.grad = [](Graph& g, const GradContext& c) -> std::vector<std::optional<EntryRef>> {
      return {g.add1("softmax_cross_entropy_grad", {c.inputs[0], c.inputs[1], *c.dout[0]}), std::nullopt};
    };
    d.cost = [](const void*, std::span<const TensorType> in, std::span<const TensorType> out) {
      return Cost{4.0 * static_cast<double>(in[0].numel()), io_bytes(in, out)};
    };
    d.workspace = [](const void*, std::span<const TensorType> in, std::span<const TensorType>) {
      return static_cast<size_t>(in[0].shape[0]) * dtype_size(in[0].dtype);
    };
    d.cpu = loss_cpu;
    d.sample = OpSample{{}, {logits, labels}, 5};
    registry.add(std::move(d));
  }
  {
    OpDef d;
    d.name = "softmax_cross_entropy_grad";
    d.doc = "backward of softmax_cross_entropy: dlogits = (softmax(logits) - onehot(labels)) * dloss / N";
    d.min_inputs = d.max_inputs = 3;
    d.infer = infer_grad;
    d.inplace = {{0, 0}};
    d.cost = [](const void*, std::span<const TensorType> in, std::span<const TensorType> out) {
      return Cost{6.0 * static_cast<double>(in[0].numel()), io_bytes(in, out)};
    };
    d.cpu = grad_cpu;
    d.sample = OpSample{{}, {logits, labels, scalar}, 5};
    registry.add(std::move(d));
  }
}
