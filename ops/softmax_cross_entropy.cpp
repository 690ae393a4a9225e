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
//
// The classifier and the loss fused, with the gradient in the forward pass (as Liger-Kernel's
// fused linear cross-entropy does for language models' heads): no logits tensor lives past the op.
//   linear_cross_entropy(x[N,D], w[C,D], b[C], labels[N] int32) -> loss[], dx[N,D], dw[C,D], db[C]
//       loss = softmax_cross_entropy(x w^T + b, labels); dx, dw, db its gradients for dloss = 1
//       (saved outputs: only the backward reads them). The logits are made kChunkElements at a
//       time in the workspace, their rows' losses and gradients taken there, and the chunk's
//       products dx = dz w and dw += dz^T x run before the next chunk (fully_connected's GEMM
//       libraries, ops/fully_connected.h). db sums the rows in order, chunk after chunk.
//   linear_cross_entropy_grad(dx, dw, db, dloss[]) -> dx * dloss, dw * dloss, db * dloss (in place)
// The logits' bytes (N x C: on the 2x512 LSTM with 5000 classes over 64 steps, 41 MB) are what a
// separate fully_connected and softmax_cross_entropy keep for backward, or recompute when a
// mirror plan drops them; this op keeps dx, dw and db instead (the input's and the weight's size).
// CUDA: cuda/ops_fully_connected.cpp (the same steps, cuBLAS for the products).
#include "ops/softmax_cross_entropy.h"

#include "ops/common.h"
#include "ops/fully_connected.h"

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

// One row's loss. (m - z) first: log(s) + m rounded the loss to m's precision (equal logits of
// 1e7 gave 1.0 for ln 2).
template <class T>
T row_loss_of(const T* zn, int64_t cols, int32_t label) {
  auto [m, s] = max_and_sum(zn, cols);
  return (m - zn[label]) + std::log(s);
}

// The row losses summed in row order, in double: a float sum over many rows drifted (6e-4
// relative at 65536 equal rows).
template <class T>
double row_total(const T* row_loss, int64_t rows) {
  double total = 0;
  for (int64_t n = 0; n < rows; ++n) total += static_cast<double>(row_loss[n]);
  return total;
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
    for_rows(rows, cols, [&](int64_t n) { row_loss[n] = row_loss_of(z + n * cols, cols, labels[n]); });
    c.out[0].as<T>()[0] = static_cast<T>(row_total(row_loss, rows) / static_cast<double>(rows));
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

// ---- linear_cross_entropy ----

// Logits per chunk: rows of the batch at a time so that a chunk holds about this many (2 MiB of
// float32), at least one row.
constexpr int64_t kChunkElements = 1 << 19;
int64_t chunk_rows(int64_t rows, int64_t classes) { return std::clamp<int64_t>(kChunkElements / classes, 1, rows); }

std::vector<TensorType> infer_linear_loss(const void*, std::span<const TensorType> in) {
  const TensorType &x = in[0], &w = in[1], &b = in[2], &labels = in[3];
  const char* op = "linear_cross_entropy";
  MNEMO_CHECK(is_float(x.dtype) && x.shape.size() == 2 && x.shape[0] >= 1 && x.shape[1] >= 1)
      << op << ": x must be a float [N,D] matrix with N, D >= 1, got " << x.str();
  MNEMO_CHECK(w.dtype == x.dtype && w.shape.size() == 2 && w.shape[1] == x.shape[1] && w.shape[0] >= 1)
      << op << ": w must be [C,D] with x's D and dtype (x is " << x.str() << "), got " << w.str();
  const TensorType want_b{x.dtype, {w.shape[0]}}, want_l{DType::i32, {x.shape[0]}};
  MNEMO_CHECK(b == want_b) << op << ": bias must be " << want_b.str() << " (one per class), got " << b.str();
  MNEMO_CHECK(labels == want_l) << op << ": labels must be " << want_l.str() << " (one class index per row of x), got "
                                << labels.str();
  return {TensorType{x.dtype, {}}, x, w, b};
}

void linear_loss_cpu(const KernelContext& c) {
  dispatch_float(c.in[0].dtype(), "linear_cross_entropy", [&]<class T>() {
    const int64_t rows = c.in[0].dim(0), d = c.in[0].dim(1), classes = c.in[1].dim(0);
    check_labels(c.in[3], classes, "linear_cross_entropy");
    const int64_t chunk = chunk_rows(rows, classes);
    MNEMO_CHECK(c.workspace && c.workspace_bytes >= static_cast<size_t>(chunk * classes + rows) * sizeof(T))
        << "linear_cross_entropy: workspace of " << c.workspace_bytes << " bytes, need "
        << (chunk * classes + rows) * sizeof(T);
    const T *x = c.in[0].as<T>(), *w = c.in[1].as<T>(), *bias = c.in[2].as<T>();
    const int32_t* labels = c.in[3].as<int32_t>();
    T *dx = c.out[1].as<T>(), *dw = c.out[2].as<T>(), *db = c.out[3].as<T>();
    T* z = static_cast<T*>(c.workspace);
    T* row_loss = z + chunk * classes;
    const T scale = T(1) / static_cast<T>(rows);
    for (int64_t r0 = 0; r0 < rows; r0 += chunk) {
      const int64_t n = std::min(chunk, rows - r0);
      fc_gemm(false, true, n, classes, d, x + r0 * d, w, z, false);  // z = x w^T
      for_rows(n, classes, [&](int64_t i) {
        T* zi = z + i * classes;
        for (int64_t j = 0; j < classes; ++j) zi[j] += bias[j];
        const int64_t label = labels[r0 + i];
        const T m = row_max(zi, classes), picked = zi[label];
        exp_shifted(zi, m, zi, classes);
        const T s = lane_sum(zi, classes);
        row_loss[r0 + i] = (m - picked) + std::log(s);  // (as softmax_cross_entropy's)
        for (int64_t j = 0; j < classes; ++j) zi[j] = (zi[j] / s - (j == label ? T(1) : T(0))) * scale;
      });
      fc_bias_sums(z, n, classes, db, r0 > 0);  // db (+)= the chunk's rows, in order
      fc_gemm(false, false, n, d, classes, z, w, dx + r0 * d, false);  // dx = dz w
      fc_gemm(true, false, classes, d, n, z, x + r0 * d, dw, r0 > 0);  // dw (+)= dz^T x
    }
    c.out[0].as<T>()[0] = static_cast<T>(row_total(row_loss, rows) * static_cast<double>(scale));
  });
}

std::vector<TensorType> infer_linear_grad(const void*, std::span<const TensorType> in) {
  const char* op = "linear_cross_entropy_grad";
  MNEMO_CHECK(is_float(in[0].dtype) && in[1].dtype == in[0].dtype && in[2].dtype == in[0].dtype)
      << op << ": dx, dw and db must be float of one dtype, got " << in[0].str() << ", " << in[1].str() << " and "
      << in[2].str();
  const TensorType want{in[0].dtype, {}};
  MNEMO_CHECK(in[3] == want) << op << ": dloss must be " << want.str() << ", got " << in[3].str();
  return {in[0], in[1], in[2]};
}

// Each output may be its input (in place).
void linear_grad_cpu(const KernelContext& c) {
  dispatch_float(c.in[0].dtype(), "linear_cross_entropy_grad", [&]<class T>() {
    const T g = c.in[3].as<T>()[0];
    for (int k = 0; k < 3; ++k) {
      const T* a = c.in[k].as<T>();
      T* y = c.out[k].as<T>();
      parallel_range(c.in[k].numel(), [&](int64_t lo, int64_t hi) {
        for (int64_t i = lo; i < hi; ++i) y[i] = a[i] * g;
      });
    }
  });
}

}  // namespace

float softmax_cross_entropy_row(const float* z, int64_t classes, int32_t label) { return row_loss_of(z, classes, label); }

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
  const TensorType x{DType::f32, {3, 4}}, w{DType::f32, {5, 4}}, bias{DType::f32, {5}};
  {
    OpDef d;
    d.name = "linear_cross_entropy";
    d.traits.reduction = true;
    d.doc = "fully_connected then softmax_cross_entropy in one node, the gradient made in the forward pass (no logits kept)";
    d.min_inputs = d.max_inputs = 4;
    d.infer = infer_linear_loss;
    d.saved_outputs = {1, 2, 3};
    d.grad = [](Graph& g, const GradContext& c) -> std::vector<std::optional<EntryRef>> {
      const auto out = g.add("linear_cross_entropy_grad", {c.outputs[1], c.outputs[2], c.outputs[3], *c.dout[0]});
      return {EntryRef{out, 0}, EntryRef{out, 1}, EntryRef{out, 2}, std::nullopt};
    };
    d.cost = [](const void*, std::span<const TensorType> in, std::span<const TensorType> out) {
      const double logits = static_cast<double>(in[0].shape[0]) * static_cast<double>(in[1].shape[0]);
      return Cost{3 * 2.0 * logits * static_cast<double>(in[0].shape[1]) + 8.0 * logits, io_bytes(in, out)};
    };
    d.workspace = [](const void*, std::span<const TensorType> in, std::span<const TensorType>) {
      const int64_t rows = in[0].shape[0], classes = in[1].shape[0];
      return static_cast<size_t>(chunk_rows(rows, classes) * classes + rows) * dtype_size(in[0].dtype);
    };
    d.cpu = linear_loss_cpu;
    d.sample = OpSample{{}, {x, w, bias, labels}, 5};
    registry.add(std::move(d));
  }
  {
    OpDef d;
    d.name = "linear_cross_entropy_grad";
    d.doc = "backward of linear_cross_entropy: its saved dx, dw, db times dloss";
    d.min_inputs = d.max_inputs = 4;
    d.infer = infer_linear_grad;
    d.inplace = {{0, 0}, {1, 1}, {2, 2}};
    d.cost = [](const void*, std::span<const TensorType> in, std::span<const TensorType> out) {
      return Cost{static_cast<double>(in[0].numel() + in[1].numel() + in[2].numel()), io_bytes(in, out)};
    };
    d.cpu = linear_grad_cpu;
    d.sample = OpSample{{}, {x, w, bias, scalar}, 5};
    registry.add(std::move(d));
  }
}
