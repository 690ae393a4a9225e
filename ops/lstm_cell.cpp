// The elementwise tail of an LSTM cell as one op, and its backward:
//   lstm_cell(gates[N,4H] [, c_prev[N,H] [, gates_h[N,4H]]]) -> (h[N,H], c[N,H], act[N,4H])
//     a = gates (+ gates_h);  i, f, o = sigmoid(a_i, a_f, a_o);  g = tanh(a_g)   (gate order i, f, g, o)
//     c = f * c_prev + i * g  (no c_prev: c = i * g);  h = o * tanh(c);  act = [i, f, g, o]
//   lstm_cell_grad{has_dh, has_dc, has_c_prev}(act, c [, dh] [, dc] [, c_prev]) -> (dgates [, dc_prev])
//     dc' = dc + dh * o * (1 - tanh(c)^2);  dgates = [dc' g i (1-i), dc' c_prev f (1-f),
//     dc' i (1-g^2), dh tanh(c) o (1-o)];  dc_prev = dc' f;  the gradient of gates_h is dgates.
// It replaces the 10-12 fine-grained nodes of a step (split, 3 sigmoid, 2 tanh, 3 mul, 1-2 add)
// and their backward nodes by one pass over the gates each way: what `model.cell: fused` builds
// (models/lstm.cpp). `act` is a saved output (never differentiated): backward reads it and c
// (tanh(c) is recomputed there, not saved), and c_prev. In place: gates -> act, act -> dgates
// (each (row, k) reads its four gate values before writing them).
#include "ops/lstm_cell.h"

#include <vector>

#include "ops/common.h"

namespace mnemo::ops {
namespace {

constexpr auto kSigmoid = [](const auto& v) { return v.logistic(); };
constexpr auto kTanh = [](const auto& v) { return v.tanh(); };

std::vector<TensorType> infer_cell(const void*, std::span<const TensorType> in) {
  const TensorType& a = in[0];
  require_float(a, "lstm_cell: gates");
  MNEMO_CHECK(a.shape.size() == 2 && a.shape[1] % 4 == 0 && a.shape[1] > 0)
      << "lstm_cell: gates must be [N, 4H] (the i, f, g, o gates side by side), got " << a.str();
  const TensorType state{a.dtype, {a.shape[0], a.shape[1] / 4}};
  if (in.size() >= 2) {
    MNEMO_CHECK(in[1] == state) << "lstm_cell: c_prev must be " << state.str() << " (N, H of the gates), got " << in[1].str();
  }
  if (in.size() == 3) require_same(a, in[2], "lstm_cell: gates and gates_h");
  return {state, state, a};
}

template <class F>
void over_rows(int64_t rows, int64_t H, F&& f) {
  // One row of the batch per iteration; a single thread below 4096 (row, k) pairs.
#pragma omp parallel for schedule(static) if (rows > 1 && rows * H >= 4096 && !omp_in_parallel())
  for (int64_t r = 0; r < rows; ++r) f(r);
}

// Per row: the gate sums, then sigmoid / tanh over each gate segment as Eigen's vectorised
// functions (vectorized_map: for float32 rational approximations within a few ulp of the exact
// values, several times faster than scalar std::exp / std::tanh), then c and h. Every statement
// reads and writes the same positions, so act may alias gates.
void cell_cpu(const KernelContext& c) {  // in: gates [, c_prev [, gates_h]]  out: h, c, act
  dispatch_float(c.in[0].dtype(), "lstm_cell", [&]<class T>() {
    const int64_t N = c.out[0].dim(0), H = c.out[0].dim(1);
    const T* a = c.in[0].as<T>();
    const T* cp = c.in.size() >= 2 ? c.in[1].as<T>() : nullptr;
    const T* a2 = c.in.size() == 3 ? c.in[2].as<T>() : nullptr;
    T* h = c.out[0].as<T>();
    T* cn = c.out[1].as<T>();
    T* act = c.out[2].as<T>();
    over_rows(N, H, [&](int64_t r) {
      const T* ar = a + r * 4 * H;
      T* y = act + r * 4 * H;
      if (a2) {
        const T* a2r = a2 + r * 4 * H;
        for (int64_t j = 0; j < 4 * H; ++j) y[j] = ar[j] + a2r[j];
        ar = y;
      }
      vectorized_map(ar, y, 2 * H, kSigmoid);             // i, f
      vectorized_map(ar + 2 * H, y + 2 * H, H, kTanh);    // g
      vectorized_map(ar + 3 * H, y + 3 * H, H, kSigmoid);  // o
      T* cr = cn + r * H;
      T* hr = h + r * H;
      for (int64_t k = 0; k < H; ++k) cr[k] = cp ? y[H + k] * cp[r * H + k] + y[k] * y[2 * H + k] : y[k] * y[2 * H + k];
      vectorized_map(cr, hr, H, kTanh);
      for (int64_t k = 0; k < H; ++k) hr[k] = y[3 * H + k] * hr[k];
    });
  });
}

LstmCellGradParams parse_grad(AttrReader& r) {
  LstmCellGradParams p;
  p.has_dh = r.get_bool("has_dh", true);
  p.has_dc = r.get_bool("has_dc", true);
  p.has_c_prev = r.get_bool("has_c_prev", true);
  MNEMO_CHECK(p.has_dh || p.has_dc) << "lstm_cell_grad needs dh or dc (has_dh and has_dc are both false)";
  return p;
}

int grad_inputs(const LstmCellGradParams& p) { return 2 + p.has_dh + p.has_dc + p.has_c_prev; }

std::vector<TensorType> infer_grad(const void* params, std::span<const TensorType> in) {
  const auto& p = *static_cast<const LstmCellGradParams*>(params);
  MNEMO_CHECK(static_cast<int>(in.size()) == grad_inputs(p))
      << "lstm_cell_grad: has_dh " << p.has_dh << ", has_dc " << p.has_dc << ", has_c_prev " << p.has_c_prev << " need "
      << grad_inputs(p) << " inputs (act, c, then those), got " << in.size();
  const TensorType& act = in[0];
  require_float(act, "lstm_cell_grad: act");
  MNEMO_CHECK(act.shape.size() == 2 && act.shape[1] % 4 == 0 && act.shape[1] > 0)
      << "lstm_cell_grad: act must be [N, 4H], got " << act.str();
  const TensorType state{act.dtype, {act.shape[0], act.shape[1] / 4}};
  for (size_t j = 1; j < in.size(); ++j)
    MNEMO_CHECK(in[j] == state) << "lstm_cell_grad: input " << j << " must be " << state.str() << ", got " << in[j].str();
  if (p.has_c_prev) return {act, state};
  return {act};
}

// Per row: tanh(c) recomputed with vectorized_map as the forward, then one loop over k that
// reads a position's four gate values before writing their gradients (dgates may alias act).
void cell_grad_cpu(const KernelContext& c) {  // in: act, c [, dh] [, dc] [, c_prev]  out: dgates [, dc_prev]
  const LstmCellGradParams& p = c.p<LstmCellGradParams>();
  dispatch_float(c.in[0].dtype(), "lstm_cell_grad", [&]<class T>() {
    const int64_t N = c.in[1].dim(0), H = c.in[1].dim(1);
    size_t next = 2;
    const T* act = c.in[0].as<T>();
    const T* cv = c.in[1].as<T>();
    const T* dh = p.has_dh ? c.in[next++].as<T>() : nullptr;
    const T* dc = p.has_dc ? c.in[next++].as<T>() : nullptr;
    const T* cp = p.has_c_prev ? c.in[next++].as<T>() : nullptr;
    T* da = c.out[0].as<T>();
    T* dcp = p.has_c_prev ? c.out[1].as<T>() : nullptr;
    over_rows(N, H, [&](int64_t r) {
      thread_local std::vector<T> tanh_c;
      tanh_c.resize(static_cast<size_t>(H));
      vectorized_map(cv + r * H, tanh_c.data(), H, kTanh);
      const T* actr = act + r * 4 * H;
      T* dar = da + r * 4 * H;
      for (int64_t k = 0; k < H; ++k) {
        const int64_t s = r * H + k;
        const T i = actr[k], f = actr[H + k], g = actr[2 * H + k], o = actr[3 * H + k];
        const T tc = tanh_c[static_cast<size_t>(k)];
        const T dhv = dh ? dh[s] : T(0);
        const T dct = (dc ? dc[s] : T(0)) + dhv * o * (T(1) - tc * tc);
        dar[k] = dct * g * i * (T(1) - i);
        dar[H + k] = cp ? dct * cp[s] * f * (T(1) - f) : T(0);
        dar[2 * H + k] = dct * i * (T(1) - g * g);
        dar[3 * H + k] = dhv * tc * o * (T(1) - o);
        if (dcp) dcp[s] = dct * f;
      }
    });
  });
}

std::vector<std::optional<EntryRef>> cell_grad(Graph& g, const GradContext& c) {
  LstmCellGradParams p;
  p.has_dh = c.dout[0].has_value();
  p.has_dc = c.dout[1].has_value();
  p.has_c_prev = c.inputs.size() >= 2;
  std::vector<EntryRef> in{c.outputs[2], c.outputs[1]};
  if (p.has_dh) in.push_back(*c.dout[0]);
  if (p.has_dc) in.push_back(*c.dout[1]);
  if (p.has_c_prev) in.push_back(c.inputs[1]);
  const int id = g.add("lstm_cell_grad", in, {{"has_dh", p.has_dh}, {"has_dc", p.has_dc}, {"has_c_prev", p.has_c_prev}});
  std::vector<std::optional<EntryRef>> out{EntryRef{id, 0}};
  if (p.has_c_prev) out.push_back(EntryRef{id, 1});
  if (c.inputs.size() == 3) out.push_back(EntryRef{id, 0});  // gates_h: the same sum
  return out;
}

// Per (row, k): 3 sigmoids and 2 tanh (about 4 flops each) and 5 more.
Cost cell_cost(const void*, std::span<const TensorType> in, std::span<const TensorType> out) {
  return Cost{25.0 * static_cast<double>(out[0].numel()), io_bytes(in, out)};
}
Cost cell_grad_cost(const void*, std::span<const TensorType> in, std::span<const TensorType> out) {
  return Cost{25.0 * static_cast<double>(in[1].numel()), io_bytes(in, out)};
}

TensorType f32(Shape s) { return TensorType{DType::f32, std::move(s)}; }

}  // namespace
}  // namespace mnemo::ops

MNEMO_REGISTER_OPS(lstm_cell) {
  using namespace mnemo;
  using namespace mnemo::ops;
  {
    OpDef d;
    d.name = "lstm_cell";
    d.doc = "an LSTM cell's elementwise tail: (h, c, act) from gates [N,4H] (+ gates_h) and c_prev; act = the "
            "activated gates i, f, g, o (saved for backward)";
    d.min_inputs = 1;
    d.max_inputs = 3;
    d.infer = infer_cell;
    d.grad = cell_grad;
    d.saved_outputs = {2};
    d.inplace = {{0, 2}};
    d.cost = cell_cost;
    d.cpu = cell_cpu;
    d.sample = OpSample{{}, {f32({3, 20}), f32({3, 5}), f32({3, 20})}};
    registry.add(std::move(d));
  }
  {
    OpDef d;
    d.name = "lstm_cell_grad";
    d.doc = "backward of lstm_cell: (dgates [, dc_prev]) from (act, c [, dh] [, dc] [, c_prev]); attrs has_dh, has_dc, "
            "has_c_prev";
    d.min_inputs = 3;
    d.max_inputs = 5;
    d.parse = parse_with(parse_grad, "lstm_cell_grad");
    d.infer = infer_grad;
    d.inplace = {{0, 0}};
    d.cost = cell_grad_cost;
    d.cpu = cell_grad_cpu;
    d.sample = OpSample{{}, {f32({3, 20}), f32({3, 5}), f32({3, 5}), f32({3, 5}), f32({3, 5})}};
    registry.add(std::move(d));
  }
}
