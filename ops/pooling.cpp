// Spatial pooling of x[N,C,H,W] with an R x S window, stride (sh, sw) and zero padding (ph, pw):
// output y[N,C,P,Q], P = (H + 2ph - R) / sh + 1, Q = (W + 2pw - S) / sw + 1 (floor; with
// ceil_mode=true rounded up, then one less if the last window would start at or past H + ph, as
// PyTorch). Output (p,q) reads the window rows h = p*sh - ph + r, columns w = q*sw - pw + s,
// r < R, s < S; padded cells (outside the input) are never read. Padding is at most half the window
// (as in PyTorch), so every window holds at least one input cell.
//   max_pool2d{kernel, stride=kernel, padding=0}(x) -> y = max over the window
//   max_pool2d_grad{same}(x, y, dy) -> dx: dy(p,q) goes to the window's WINNER, the first cell in
//       row-major order (r, then s) whose value equals y(p,q), i.e. the first maximal cell (if the
//       window holds a NaN, y is NaN and the first NaN wins). Overlapping windows accumulate.
//   avg_pool2d{kernel, stride, padding, count_include_pad=true, ceil_mode=false}(x) -> y = window
//       sum / divisor, divisor = the window's cells inside the padded input [-ph, H+ph) x [-pw, W+pw)
//       (count_include_pad: R*S unless a ceil_mode window overhangs) or the input cells in it
//   avg_pool2d_grad{same, input_hw=[H,W]}(dy) -> dx: each window cell gets dy(p,q) / divisor
//   global_avg_pool(x) -> y[N,C] = mean over H,W;  global_avg_pool_grad{input_hw}(dy) -> dx = dy/(H*W)
// Kernels run one (n,c) plane per task; every sum has a fixed order (bitwise reproducible).
#include "ops/pooling.h"

#include <limits>

#include "ops/common.h"

namespace mnemo::ops {
namespace {

PoolParams read_window(AttrReader& r) {
  constexpr int64_t kMissing = std::numeric_limits<int64_t>::min();
  PoolParams p;
  const auto k = r.get_ints_n("kernel", 2, kMissing);
  MNEMO_CHECK(k[0] != kMissing) << "missing attribute 'kernel' (an integer or [r,s])";
  const auto st = r.get_ints_n("stride", 2, kMissing);
  const auto pad = r.get_ints_n("padding", 2, 0);
  p.r = k[0], p.s = k[1];
  p.sh = st[0] == kMissing ? p.r : st[0], p.sw = st[1] == kMissing ? p.s : st[1];
  p.ph = pad[0], p.pw = pad[1];
  p.ceil_mode = r.get_bool("ceil_mode", false);
  MNEMO_CHECK(p.r >= 1 && p.s >= 1) << "kernel must be >= 1, got [" << p.r << "," << p.s << "]";
  for (int64_t v : {p.r, p.s, p.sh, p.sw, p.ph, p.pw})
    MNEMO_CHECK(v <= (int64_t{1} << 24)) << "kernel, stride and padding must be at most 2^24, got " << v;
  MNEMO_CHECK(p.sh >= 1 && p.sw >= 1) << "stride must be >= 1, got [" << p.sh << "," << p.sw << "]";
  MNEMO_CHECK(p.ph >= 0 && p.pw >= 0 && 2 * p.ph <= p.r && 2 * p.pw <= p.s)
      << "padding must be in [0, kernel/2], got padding [" << p.ph << "," << p.pw << "] for kernel [" << p.r
      << "," << p.s << "]";
  return p;
}
PoolParams parse_max(AttrReader& r) { return read_window(r); }
PoolParams parse_avg(AttrReader& r) {
  PoolParams p = read_window(r);
  p.count_include_pad = r.get_bool("count_include_pad", true);
  return p;
}
void read_input_hw(AttrReader& r, PoolParams& p) {
  const auto hw = r.require_ints("input_hw");
  MNEMO_CHECK(hw.size() == 2 && hw[0] >= 1 && hw[1] >= 1) << "input_hw must be [H,W] with H, W >= 1, got "
                                                          << attr_str(hw);
  p.h = hw[0], p.w = hw[1];
}
PoolParams parse_avg_grad(AttrReader& r) {
  PoolParams p = parse_avg(r);
  read_input_hw(r, p);
  return p;
}
PoolParams parse_global_grad(AttrReader& r) {
  PoolParams p;
  read_input_hw(r, p);
  return p;
}
PoolParams parse_none(AttrReader&) { return {}; }

void check_nchw(const TensorType& t, const char* what) {
  require_float(t, what);
  MNEMO_CHECK(t.shape.size() == 4) << what << " must be [N,C,H,W], got " << t.str();
}

// Outputs along one axis of extent `in` (PyTorch's pooling_output_shape).
int64_t pooled_size(int64_t in, int64_t k, int64_t st, int64_t pad, bool ceil_mode) {
  int64_t out = (in + 2 * pad - k + (ceil_mode ? st - 1 : 0)) / st + 1;
  if (ceil_mode && (out - 1) * st >= in + pad) --out;  // the last window must start inside
  return out;
}

// y's type for x[N,C,H,W] of dtype `dt`.
TensorType pooled(const PoolParams& p, DType dt, int64_t n, int64_t c, int64_t h, int64_t w) {
  MNEMO_CHECK(h + 2 * p.ph >= p.r && w + 2 * p.pw >= p.s)
      << "pooling window [" << p.r << "," << p.s << "] is larger than the padded input [" << h + 2 * p.ph << ","
      << w + 2 * p.pw << "] (input [" << h << "," << w << "], padding [" << p.ph << "," << p.pw << "])";
  return {dt, {n, c, pooled_size(h, p.r, p.sh, p.ph, p.ceil_mode), pooled_size(w, p.s, p.sw, p.pw, p.ceil_mode)}};
}
TensorType pooled(const PoolParams& p, const TensorType& x) {
  return pooled(p, x.dtype, x.shape[0], x.shape[1], x.shape[2], x.shape[3]);
}

std::vector<TensorType> infer_pool(const void* params, std::span<const TensorType> in) {
  check_nchw(in[0], "x");
  return {pooled(*static_cast<const PoolParams*>(params), in[0])};
}
std::vector<TensorType> infer_max_grad(const void* params, std::span<const TensorType> in) {
  check_nchw(in[0], "x");
  const TensorType y = pooled(*static_cast<const PoolParams*>(params), in[0]);
  MNEMO_CHECK(in[1] == y) << "y must be " << y.str() << " (max_pool2d of x " << in[0].str() << "), got "
                          << in[1].str();
  MNEMO_CHECK(in[2] == y) << "dy must be " << y.str() << ", got " << in[2].str();
  return {in[0]};
}
std::vector<TensorType> infer_avg_grad(const void* params, std::span<const TensorType> in) {
  const auto& p = *static_cast<const PoolParams*>(params);
  check_nchw(in[0], "dy");
  const TensorType y = pooled(p, in[0].dtype, in[0].shape[0], in[0].shape[1], p.h, p.w);
  MNEMO_CHECK(in[0] == y) << "dy must be " << y.str() << " for input_hw [" << p.h << "," << p.w << "], got "
                          << in[0].str();
  return {TensorType{in[0].dtype, {in[0].shape[0], in[0].shape[1], p.h, p.w}}};
}
std::vector<TensorType> infer_global(const void*, std::span<const TensorType> in) {
  check_nchw(in[0], "x");
  return {TensorType{in[0].dtype, {in[0].shape[0], in[0].shape[1]}}};
}
std::vector<TensorType> infer_global_grad(const void* params, std::span<const TensorType> in) {
  const auto& p = *static_cast<const PoolParams*>(params);
  require_float(in[0], "dy");
  MNEMO_CHECK(in[0].shape.size() == 2) << "dy must be [N,C], got " << in[0].str();
  return {TensorType{in[0].dtype, {in[0].shape[0], in[0].shape[1], p.h, p.w}}};
}

// ---- kernels ----

// Geometry of one call: input plane h x w, output plane op x oq.
struct Geometry {
  PoolParams p;
  int64_t h, w, op, oq;
  // Window rows [r0, r1) of output row pi that lie inside the input (h index = pi*sh - ph + r).
  void rows(int64_t pi, int64_t& h0, int64_t& r0, int64_t& r1) const {
    h0 = pi * p.sh - p.ph;
    r0 = std::max<int64_t>(0, -h0), r1 = std::min<int64_t>(p.r, h - h0);
  }
  void cols(int64_t qi, int64_t& w0, int64_t& s0, int64_t& s1) const {
    w0 = qi * p.sw - p.pw;
    s0 = std::max<int64_t>(0, -w0), s1 = std::min<int64_t>(p.s, w - w0);
  }
  // Output columns [q0, q1) whose window column s lies inside the input.
  void cols_for(int64_t s, int64_t& q0, int64_t& q1) const {
    const int64_t lo = p.pw - s, hi = w - 1 + p.pw - s;  // need lo <= q*sw <= hi
    q0 = lo <= 0 ? 0 : (lo + p.sw - 1) / p.sw;
    q1 = hi < 0 ? 0 : std::min<int64_t>(oq, hi / p.sw + 1);
    q1 = std::max(q0, q1);
  }
  double divisor(int64_t pi, int64_t qi) const {
    int64_t h0, r0, r1, w0, s0, s1;
    rows(pi, h0, r0, r1);
    cols(qi, w0, s0, s1);
    if (p.count_include_pad)  // the window clipped to the padded input (only ceil_mode windows overhang it)
      return static_cast<double>((std::min(h0 + p.r, h + p.ph) - h0) * (std::min(w0 + p.s, w + p.pw) - w0));
    return static_cast<double>((r1 - r0) * (s1 - s0));
  }
};
Geometry geometry(const PoolParams& p, const TensorView& x, const TensorView& y) {
  return {p, x.dim(2), x.dim(3), y.dim(2), y.dim(3)};
}

// Row-wise forward: for each output row, visit the window cells in (r, s) order and update the
// whole row of outputs at once (contiguous in q; the loop over q vectorises). SW: the column
// stride when known at compile time (1, 2), else 0.
template <class T, bool Max, int SW>
void pool_forward(const Geometry& g, const T* x, T* y, int64_t planes) {
  const int64_t sw = SW ? SW : g.p.sw;
  parallel_for(planes, [&](int64_t plane) {
    const T* xp = x + plane * g.h * g.w;
    T* yp = y + plane * g.op * g.oq;
    for (int64_t pi = 0; pi < g.op; ++pi) {
      int64_t h0, r0, r1;
      g.rows(pi, h0, r0, r1);
      T* yrow = yp + pi * g.oq;
      std::fill_n(yrow, g.oq, Max ? -std::numeric_limits<T>::infinity() : T(0));
      for (int64_t r = r0; r < r1; ++r)
        for (int64_t s = 0; s < g.p.s; ++s) {
          int64_t q0, q1;
          g.cols_for(s, q0, q1);
          if (q0 >= q1) continue;
          const T* xs = xp + (h0 + r) * g.w + (q0 * sw - g.p.pw + s);  // cell of output q0
          for (int64_t q = q0; q < q1; ++q) {
            const T v = xs[(q - q0) * sw];
            if constexpr (Max) yrow[q] = (v > yrow[q] || v != v) ? v : yrow[q];  // strict >: first max
            else yrow[q] += v;
          }
        }
      if constexpr (!Max)
        for (int64_t q = 0; q < g.oq; ++q) yrow[q] = static_cast<T>(yrow[q] / g.divisor(pi, q));
    }
  });
}

template <bool Max>
void pool_forward_cpu(const KernelContext& c) {
  const Geometry g = geometry(c.p<PoolParams>(), c.in[0], c.out[0]);
  dispatch_float(c.in[0].dtype(), Max ? "max_pool2d" : "avg_pool2d", [&]<class T>() {
    const T* x = c.in[0].as<T>();
    T* y = c.out[0].as<T>();
    const int64_t planes = c.in[0].dim(0) * c.in[0].dim(1);
    if (g.p.sw == 1) pool_forward<T, Max, 1>(g, x, y, planes);
    else if (g.p.sw == 2) pool_forward<T, Max, 2>(g, x, y, planes);
    else pool_forward<T, Max, 0>(g, x, y, planes);
  });
}

// Output columns are processed in blocks of kBlock, window cells outermost and columns innermost,
// so the inner loops run over contiguous outputs (they vectorise) and need only a small buffer.
constexpr int64_t kBlock = 64;

// in: x, y, dy. The winner of each window is the first cell (row-major) equal to y: cells are
// visited in reverse order and every match overwrites the candidate, branch-free. A window with no
// match (y NaN, or a y not computed from this x) falls back to first_max: the forward's rule.
template <class T>
int64_t first_max(const Geometry& g, const T* xp, int64_t pi, int64_t qi) {
  int64_t h0, r0, r1, w0, s0, s1, best = -1;
  g.rows(pi, h0, r0, r1);
  g.cols(qi, w0, s0, s1);
  T bv = T(0);
  for (int64_t r = r0; r < r1; ++r)
    for (int64_t s = s0; s < s1; ++s) {
      const int64_t idx = (h0 + r) * g.w + w0 + s;
      const T v = xp[idx];
      if (best < 0 || v > bv || (v != v && bv == bv)) best = idx, bv = v;
    }
  return best;
}

void max_pool_grad_cpu(const KernelContext& c) {
  const Geometry g = geometry(c.p<PoolParams>(), c.in[0], c.in[1]);
  dispatch_float(c.in[0].dtype(), "max_pool2d_grad", [&]<class T>() {
    const T* x = c.in[0].as<T>();
    const T* y = c.in[1].as<T>();
    const T* dy = c.in[2].as<T>();
    T* dx = c.out[0].as<T>();
    parallel_for(c.in[0].dim(0) * c.in[0].dim(1), [&](int64_t plane) {
      const T* xp = x + plane * g.h * g.w;
      T* dxp = dx + plane * g.h * g.w;
      std::fill_n(dxp, g.h * g.w, T(0));
      int64_t best[kBlock];
      for (int64_t pi = 0; pi < g.op; ++pi) {
        int64_t h0, r0, r1;
        g.rows(pi, h0, r0, r1);
        const int64_t o = (plane * g.op + pi) * g.oq;
        for (int64_t qb = 0; qb < g.oq; qb += kBlock) {
          const int64_t qe = std::min(g.oq, qb + kBlock);
          std::fill_n(best, qe - qb, int64_t{-1});
          const T* yb = y + o + qb;
          for (int64_t r = r1 - 1; r >= r0; --r)
            for (int64_t s = g.p.s - 1; s >= 0; --s) {
              int64_t q0, q1;
              g.cols_for(s, q0, q1);
              q0 = std::max(q0, qb), q1 = std::min(q1, qe);
              const int64_t base = (h0 + r) * g.w - g.p.pw + s, sw = g.p.sw;
              for (int64_t q = q0; q < q1; ++q) {
                const int64_t idx = base + q * sw;
                best[q - qb] = xp[idx] == yb[q - qb] ? idx : best[q - qb];
              }
            }
          for (int64_t q = qb; q < qe; ++q) {
            const int64_t b = best[q - qb] >= 0 ? best[q - qb] : first_max(g, xp, pi, q);
            dxp[b] += dy[o + q];
          }
        }
      }
    });
  });
}

// in: dy. Each window cell gets dy / divisor: windows in (p, column block) order, then cells (r, s).
void avg_pool_grad_cpu(const KernelContext& c) {
  const Geometry g = geometry(c.p<PoolParams>(), c.out[0], c.in[0]);
  dispatch_float(c.in[0].dtype(), "avg_pool2d_grad", [&]<class T>() {
    const T* dy = c.in[0].as<T>();
    T* dx = c.out[0].as<T>();
    parallel_for(c.in[0].dim(0) * c.in[0].dim(1), [&](int64_t plane) {
      T* dxp = dx + plane * g.h * g.w;
      std::fill_n(dxp, g.h * g.w, T(0));
      T share[kBlock];
      for (int64_t pi = 0; pi < g.op; ++pi) {
        int64_t h0, r0, r1;
        g.rows(pi, h0, r0, r1);
        const int64_t o = (plane * g.op + pi) * g.oq;
        for (int64_t qb = 0; qb < g.oq; qb += kBlock) {
          const int64_t qe = std::min(g.oq, qb + kBlock);
          for (int64_t q = qb; q < qe; ++q) share[q - qb] = static_cast<T>(dy[o + q] / g.divisor(pi, q));
          for (int64_t r = r0; r < r1; ++r)
            for (int64_t s = 0; s < g.p.s; ++s) {
              int64_t q0, q1;
              g.cols_for(s, q0, q1);
              q0 = std::max(q0, qb), q1 = std::min(q1, qe);
              T* row = dxp + (h0 + r) * g.w - g.p.pw + s;
              const int64_t sw = g.p.sw;
              for (int64_t q = q0; q < q1; ++q) row[q * sw] += share[q - qb];
            }
        }
      }
    });
  });
}

// Sum of p[0, len) in double: 16 interleaved partial sums combined pairwise (order fixed by len).
template <class T>
double plane_sum(const T* p, int64_t len) {
  constexpr int kLanes = 16;
  double a[kLanes] = {};
  int64_t i = 0;
  for (; i + kLanes <= len; i += kLanes)
    for (int k = 0; k < kLanes; ++k) a[k] += static_cast<double>(p[i + k]);
  for (int k = 0; i < len; ++i, ++k) a[k] += static_cast<double>(p[i]);
  for (int w = kLanes / 2; w > 0; w /= 2)
    for (int k = 0; k < w; ++k) a[k] += a[k + w];
  return a[0];
}

void global_avg_pool_cpu(const KernelContext& c) {
  dispatch_float(c.in[0].dtype(), "global_avg_pool", [&]<class T>() {
    const T* x = c.in[0].as<T>();
    T* y = c.out[0].as<T>();
    const int64_t hw = c.in[0].dim(2) * c.in[0].dim(3);
    parallel_for(c.out[0].numel(), [&](int64_t i) {
      y[i] = static_cast<T>(plane_sum(x + i * hw, hw) / static_cast<double>(hw));
    });
  });
}

void global_avg_pool_grad_cpu(const KernelContext& c) {
  dispatch_float(c.in[0].dtype(), "global_avg_pool_grad", [&]<class T>() {
    const T* dy = c.in[0].as<T>();
    T* dx = c.out[0].as<T>();
    const int64_t hw = c.out[0].dim(2) * c.out[0].dim(3);
    parallel_for(c.in[0].numel(), [&](int64_t i) {
      std::fill_n(dx + i * hw, hw, static_cast<T>(static_cast<double>(dy[i]) / static_cast<double>(hw)));
    });
  });
}

// ---- grad and cost ----

Attrs with_input_hw(Attrs a, const TensorType& x) {
  a["input_hw"] = std::vector<int64_t>{x.shape[2], x.shape[3]};
  return a;
}

// flops = per_cell * (pooled outputs * window cells), the pooled tensor being input
// `pooled_input` (-1: output 0); bytes = inputs + outputs.
CostFn window_cost(double per_cell, int pooled_input) {
  return [=](const void* params, std::span<const TensorType> in, std::span<const TensorType> out) {
    const auto& p = *static_cast<const PoolParams*>(params);
    const TensorType& y = pooled_input < 0 ? out[0] : in[pooled_input];
    return Cost{per_cell * static_cast<double>(y.numel() * p.r * p.s), io_bytes(in, out)};
  };
}

Cost global_avg_cost(const void*, std::span<const TensorType> in, std::span<const TensorType> out) {
  return Cost{static_cast<double>(in[0].numel()), io_bytes(in, out)};  // one add per input element
}

TensorType f32(Shape s) { return TensorType{DType::f32, std::move(s)}; }

OpDef pool_op(const std::string& name, const std::string& doc, int inputs, ParseFn parse, InferFn infer,
              CostFn cost, CpuKernel cpu, OpSample sample) {
  OpDef d;
  d.name = name;
  d.doc = doc;
  d.min_inputs = d.max_inputs = inputs;
  d.parse = std::move(parse);
  d.infer = std::move(infer);
  d.cost = std::move(cost);
  d.cpu = cpu;
  d.sample = std::move(sample);
  return d;
}

}  // namespace
}  // namespace mnemo::ops

MNEMO_REGISTER_OPS(pooling) {
  using namespace mnemo;
  using namespace mnemo::ops;
  // Samples in ceil_mode with overhanging last windows: H = 8 gives P = 4 (floor) or 5 (ceil; the
  // last window covers rows 7, 8 = padding, 9 = beyond it), W = 6 gives Q = 3 or 4 (columns 5, 6, 7).
  const Attrs win{{"kernel", int64_t{3}}, {"stride", int64_t{2}}, {"padding", int64_t{1}}, {"ceil_mode", true}};
  Attrs avg_win = win;
  avg_win["count_include_pad"] = true;
  const Shape xs{2, 3, 8, 6}, ys{2, 3, 5, 4};

  OpDef max = pool_op("max_pool2d", "y = max over each window (padded cells never win)", 1,
                      parse_with(parse_max, "max_pool2d"), infer_pool, window_cost(1, -1), pool_forward_cpu<true>,
                      OpSample{win, {f32(xs)}});
  max.grad = [](Graph& g, const GradContext& c) -> std::vector<std::optional<EntryRef>> {
    if (!c.dout[0]) return {std::nullopt};
    return {g.add1("max_pool2d_grad", {c.inputs[0], c.outputs[0], *c.dout[0]}, c.node.attrs)};
  };
  max.traits = {.cheap_recompute = true, .reduction = true};
  registry.add(std::move(max));
  registry.add(pool_op("max_pool2d_grad", "backward of max_pool2d: dy to the first maximal cell of each window", 3,
                       parse_with(parse_max, "max_pool2d_grad"), infer_max_grad, window_cost(1, 1),
                       max_pool_grad_cpu, OpSample{win, {f32(xs), f32(ys), f32(ys)}}));

  OpDef avg = pool_op("avg_pool2d", "y = window sum / (R*S, or the input cells in it: count_include_pad=false)", 1,
                      parse_with(parse_avg, "avg_pool2d"), infer_pool, window_cost(1, -1), pool_forward_cpu<false>,
                      OpSample{avg_win, {f32(xs)}});
  avg.grad = [](Graph& g, const GradContext& c) -> std::vector<std::optional<EntryRef>> {
    if (!c.dout[0]) return {std::nullopt};
    return {g.add1("avg_pool2d_grad", {*c.dout[0]}, with_input_hw(c.node.attrs, g.type(c.inputs[0])))};
  };
  avg.traits = {.cheap_recompute = true, .reduction = true};
  registry.add(std::move(avg));
  Attrs avg_grad_attrs = avg_win;
  avg_grad_attrs["input_hw"] = std::vector<int64_t>{xs[2], xs[3]};
  registry.add(pool_op("avg_pool2d_grad", "backward of avg_pool2d: dx from dy (attr input_hw [H,W])", 1,
                       parse_with(parse_avg_grad, "avg_pool2d_grad"), infer_avg_grad, window_cost(1, 0),
                       avg_pool_grad_cpu, OpSample{avg_grad_attrs, {f32(ys)}}));

  OpDef global = pool_op("global_avg_pool", "y[N,C] = mean of x[N,C,H,W] over H,W", 1,
                         parse_with(parse_none, "global_avg_pool"), infer_global, global_avg_cost,
                         global_avg_pool_cpu, OpSample{{}, {f32({2, 3, 5, 6})}});
  global.grad = [](Graph& g, const GradContext& c) -> std::vector<std::optional<EntryRef>> {
    if (!c.dout[0]) return {std::nullopt};
    return {g.add1("global_avg_pool_grad", {*c.dout[0]}, with_input_hw({}, g.type(c.inputs[0])))};
  };
  global.traits = {.cheap_recompute = true, .reduction = true};
  registry.add(std::move(global));
  registry.add(pool_op("global_avg_pool_grad", "backward of global_avg_pool: dx = dy / (H*W) (attr input_hw)", 1,
                       parse_with(parse_global_grad, "global_avg_pool_grad"), infer_global_grad,
                       elementwise_cost(1), global_avg_pool_grad_cpu,
                       OpSample{{{"input_hw", std::vector<int64_t>{5, 6}}}, {f32({2, 3})}}));
}
