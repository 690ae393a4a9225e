// Backward ops of conv2d (ops/conv2d.cpp builds them in its grad; maths and letters there; with
// groups G, w is [K,C/G,R,S] and output channel k reads only its group's input channels).
//   conv2d_grad_data(dy[N,K,P,Q], w[K,C/G,R,S]) -> dx[N,C,H,W]
//       dx[n,c,h,w] = sum over (k,r,s,p,q) with h = p*sh - ph + r*dh, w = q*sw - pw + s*dw of dy[n,k,p,q] w[k,c,r,s]
//       attrs stride, padding, dilation, input_hw [H,W] (required: with stride > 1 several H give one P)
//   conv2d_grad_weight(dy[N,K,P,Q], x[N,C,H,W]) -> dw[K,C/G,R,S]
//       dw[k,c,r,s] = sum_{n,p,q} dy[n,k,p,q] x[n, c, p*sh - ph + r*dh, q*sw - pw + s*dw]
//       attrs stride, padding, dilation, kernel [R,S] (required)
//   conv2d_grad_bias(dy[N,K,P,Q]) -> db[K] = sum_{n,p,q} dy[n,k,p,q]
// Kernels: float32 through oneDNN (conv2d.cpp's driver), float64 (and algo=im2col) with
// im2col/col2im + Eigen GEMM. grad_weight sums images in a fixed order per thread slot, then the
// slots in slot order, so results are bitwise reproducible for a given thread count.
#include "ops/conv2d.h"

namespace mnemo::ops::conv {
namespace {

// ----- conv2d_grad_data ------------------------------------------------------------------------
Params parse_grad_data(AttrReader& r) {
  Params p = parse_common(r);
  auto hw = r.require_ints("input_hw");
  MNEMO_CHECK(hw.size() == 2) << "conv2d_grad_data: input_hw must be [H,W], got " << hw.size() << " values";
  p.in_h = hw[0], p.in_w = hw[1];
  return p;
}

Geom data_geom(const Params& p, const TensorType& dy, const TensorType& w) {
  const auto [N, K, P, Q] = act_dims(p, dy, "dy", "conv2d_grad_data");
  require_4d(w, "w", "conv2d_grad_data");
  MNEMO_CHECK(dy.dtype == w.dtype) << "conv2d_grad_data: dy and w must have the same dtype, got " << dy.str()
                                   << " and " << w.str();
  MNEMO_CHECK(K == w.shape[0]) << "conv2d_grad_data: dy " << dy.str() << " has K=" << K
                               << " channels but w [K,C/G,R,S] " << w.str() << " has K=" << w.shape[0];
  MNEMO_CHECK(!p.block || w.shape[1] % p.block == 0)
      << "conv2d_grad_data: with block " << p.block << " the input channels C=" << w.shape[1] << " must be a multiple of it";
  const Geom g = make_geom(p, N, w.shape[1] * p.groups, p.in_h, p.in_w, w.shape[0], w.shape[2], w.shape[3],
                           "conv2d_grad_data");
  MNEMO_CHECK(g.P == P && g.Q == Q)
      << "conv2d_grad_data: input_hw [" << p.in_h << "," << p.in_w << "] gives output " << g.P << "x" << g.Q
      << " but dy is " << dy.str();
  return g;
}

std::vector<TensorType> infer_grad_data(const void* params, std::span<const TensorType> in) {
  const Params& p = *static_cast<const Params*>(params);
  const Geom g = data_geom(p, in[0], in[1]);
  return {act_type(p, in[0].dtype, g.N, g.C, g.H, g.W)};
}

// im2col path: one col buffer [CRS, PQ] per thread (none for pointwise kernels).
Prepared prepare_grad_data(const void* params, std::span<const TensorType> in, std::span<const TensorType>) {
  const Params& p = *static_cast<const Params*>(params);
  const Geom g = data_geom(p, in[0], in[1]);
  const int64_t per = is_pointwise(g) ? 0 : g.CRS() * g.PQ();
  return prepare_pass(Pass::backward_data, g, false, p, in[0].dtype,
                      static_cast<size_t>(batch_threads(g.N, g.N) * per) * dtype_size(in[0].dtype));
}

template <class T>
void grad_data_im2col(const Geom& g, const T* dy, const T* w, T* dx, T* ws, size_t ws_bytes) {
  const Geom gg = g.group();
  const int64_t per = is_pointwise(g) ? 0 : g.CRS() * g.PQ(), CRS = g.CRS(), PQ = g.PQ(), Kg = g.Kg();
  const int64_t slots = per ? static_cast<int64_t>(ws_bytes / (per * sizeof(T))) : g.N;
  MNEMO_CHECK(slots >= 1) << "conv2d_grad_data: workspace of " << ws_bytes << " bytes, needs " << per * sizeof(T);
  for_each_image(g.N, batch_threads(g.N, slots), [&](int64_t n, int64_t t, bool) {
    for (int64_t gi = 0; gi < g.G; ++gi) {
      T* dxn = dx + (n * g.C + gi * gg.C) * g.H * g.W;
      const ConstMatMap<T> wm(w + gi * Kg * CRS, Kg, CRS);
      const ConstMatMap<T> dyn(dy + (n * g.K + gi * Kg) * PQ, Kg, PQ);
      if (!per) {
        MatMap<T>(dxn, CRS, PQ).noalias() = wm.transpose() * dyn;
        continue;
      }
      T* col = ws + t * per;
      MatMap<T>(col, CRS, PQ).noalias() = wm.transpose() * dyn;
      col2im(gg, col, dxn);
    }
  });
}

void grad_data_cpu(const KernelContext& c) {
  const Params& p = c.p<Params>();
  const Geom g = data_geom(p, c.in[0].type, c.in[1].type);
  if (const auto* e = static_cast<const OnednnConv*>(c.state)) {
    onednn_run(*e, c.in[0].data, c.in[1].data, nullptr, c.out[0].data, c.workspace, c.workspace_bytes);
    return;
  }
  MNEMO_ASSERT(!p.block) << "conv2d_grad_data: block " << p.block << " without its oneDNN primitive (the node was not prepared)";
  dispatch_float(c.in[0].dtype(), "conv2d_grad_data", [&]<class T>() {
    grad_data_im2col<T>(g, c.in[0].as<T>(), c.in[1].as<T>(), c.out[0].as<T>(), static_cast<T*>(c.workspace),
                        c.workspace_bytes);
  });
}

// ----- conv2d_grad_weight ----------------------------------------------------------------------
Params parse_grad_weight(AttrReader& r) {
  Params p = parse_common(r);
  auto k = r.require_ints("kernel");
  MNEMO_CHECK(k.size() == 2) << "conv2d_grad_weight: kernel must be [R,S], got " << k.size() << " values";
  p.kr = k[0], p.ks = k[1];
  return p;
}

Geom weight_geom(const Params& p, const TensorType& dy, const TensorType& x) {
  const auto [N, K, P, Q] = act_dims(p, dy, "dy", "conv2d_grad_weight");
  const auto [xn, C, H, W] = act_dims(p, x, "x", "conv2d_grad_weight");
  MNEMO_CHECK(dy.dtype == x.dtype) << "conv2d_grad_weight: dy and x must have the same dtype, got " << dy.str()
                                   << " and " << x.str();
  MNEMO_CHECK(N == xn) << "conv2d_grad_weight: dy " << dy.str() << " and x " << x.str() << " have different batch sizes";
  const Geom g = make_geom(p, xn, C, H, W, K, p.kr, p.ks, "conv2d_grad_weight");
  MNEMO_CHECK(g.P == P && g.Q == Q)
      << "conv2d_grad_weight: x " << x.str() << " with kernel [" << p.kr << "," << p.ks << "] gives output " << g.P
      << "x" << g.Q << " but dy is " << dy.str();
  return g;
}

std::vector<TensorType> infer_grad_weight(const void* params, std::span<const TensorType> in) {
  const Geom g = weight_geom(*static_cast<const Params*>(params), in[0], in[1]);
  return {TensorType{in[0].dtype, {g.K, g.Cg(), g.R, g.S}}};
}

// im2col path, per thread slot: a col buffer [CRS, PQ] (one group's) and a partial dw [K, CRS].
int64_t weight_slot_elems(const Geom& g) { return (is_pointwise(g) ? 0 : g.CRS() * g.PQ()) + g.K * g.CRS(); }

Prepared prepare_grad_weight(const void* params, std::span<const TensorType> in, std::span<const TensorType>) {
  const Params& p = *static_cast<const Params*>(params);
  const Geom g = weight_geom(p, in[0], in[1]);
  return prepare_pass(Pass::backward_weights, g, false, p, in[0].dtype,
                      static_cast<size_t>(batch_threads(g.N, g.N) * weight_slot_elems(g)) * dtype_size(in[0].dtype));
}

template <class T>
void grad_weight_im2col(const Geom& g, const T* dy, const T* x, T* dw, T* ws, size_t ws_bytes) {
  const int64_t per = weight_slot_elems(g), col_elems = per - g.K * g.CRS(), CRS = g.CRS(), PQ = g.PQ();
  const int64_t slots = static_cast<int64_t>(ws_bytes / (per * sizeof(T)));
  MNEMO_CHECK(slots >= 1) << "conv2d_grad_weight: workspace of " << ws_bytes << " bytes, needs " << per * sizeof(T);
  const Geom gg = g.group();
  const int64_t Kg = g.Kg();
  // Slot t sums its contiguous images in order into its partial (slot 0: dw itself); group gi's
  // rows of the partial are [gi*K/G, (gi+1)*K/G).
  const int64_t used = for_each_image(g.N, batch_threads(g.N, slots), [&](int64_t n, int64_t t, bool first) {
    T* slot = ws + t * per;
    T* part_base = t == 0 ? dw : slot + col_elems;
    for (int64_t gi = 0; gi < g.G; ++gi) {
      MatMap<T> part(part_base + gi * Kg * CRS, Kg, CRS);
      const T* xn = x + (n * g.C + gi * gg.C) * g.H * g.W;
      if (col_elems) im2col(gg, xn, slot);
      const ConstMatMap<T> col(col_elems ? slot : xn, CRS, PQ);
      const ConstMatMap<T> dyn(dy + (n * g.K + gi * Kg) * PQ, Kg, PQ);
      if (first)
        part.noalias() = dyn * col.transpose();
      else
        part.noalias() += dyn * col.transpose();
    }
  });
  const int64_t total = g.K * CRS;
  parallel_range(total, [&](int64_t b, int64_t e) {
    for (int64_t t = 1; t < used; ++t) {
      const T* part = ws + t * per + col_elems;
      for (int64_t i = b; i < e; ++i) dw[i] += part[i];
    }
  });
}

void grad_weight_cpu(const KernelContext& c) {
  const Params& p = c.p<Params>();
  const Geom g = weight_geom(p, c.in[0].type, c.in[1].type);
  if (const auto* e = static_cast<const OnednnConv*>(c.state)) {
    onednn_run(*e, c.in[0].data, c.in[1].data, nullptr, c.out[0].data, c.workspace, c.workspace_bytes);
    return;
  }
  MNEMO_ASSERT(!p.block) << "conv2d_grad_weight: block " << p.block << " without its oneDNN primitive (the node was not prepared)";
  dispatch_float(c.in[0].dtype(), "conv2d_grad_weight", [&]<class T>() {
    grad_weight_im2col<T>(g, c.in[0].as<T>(), c.in[1].as<T>(), c.out[0].as<T>(), static_cast<T*>(c.workspace),
                          c.workspace_bytes);
  });
}

// ----- conv2d_grad_bias ------------------------------------------------------------------------
std::vector<TensorType> infer_grad_bias(const void*, std::span<const TensorType> in) {
  require_4d(in[0], "dy", "conv2d_grad_bias");
  return {TensorType{in[0].dtype, {in[0].shape[1]}}};
}

void grad_bias_cpu(const KernelContext& c) {
  const TensorView& dy = c.in[0];
  const int64_t N = dy.dim(0), K = dy.dim(1), PQ = dy.dim(2) * dy.dim(3);
  dispatch_float(dy.dtype(), "conv2d_grad_bias", [&]<class T>() {
    const T* d = dy.as<T>();
    T* db = c.out[0].as<T>();
    // Each k summed by one thread in the order n, then p*Q + q, in double.
    auto sum_k = [&](int64_t k) {
      double s = 0;
      for (int64_t n = 0; n < N; ++n) {
        const T* row = d + (n * K + k) * PQ;
        for (int64_t i = 0; i < PQ; ++i) s += row[i];
      }
      db[k] = static_cast<T>(s);
    };
    if (N * K * PQ < kParallelGrain)
      for (int64_t k = 0; k < K; ++k) sum_k(k);
    else
      parallel_for(K, sum_k);
  });
}

Cost conv_cost(const Geom& g, std::span<const TensorType> in, std::span<const TensorType> out) {
  return Cost{g.flops(), io_bytes(in, out)};
}

}  // namespace
}  // namespace mnemo::ops::conv

MNEMO_REGISTER_OPS(conv2d_grad) {
  using namespace mnemo;
  using namespace mnemo::ops::conv;
  // conv2d's sample (grouped, G = 2).
  const Attrs conv_attrs{{"stride", std::vector<int64_t>{2, 1}}, {"padding", int64_t{1}},
                         {"dilation", std::vector<int64_t>{1, 2}}, {"groups", int64_t{2}}};
  const TensorType dy{DType::f32, {2, 6, 3, 5}}, x{DType::f32, {2, 4, 6, 5}}, w{DType::f32, {6, 2, 3, 2}};
  {
    OpDef d;
    d.name = "conv2d_grad_data";
    d.doc = "backward of conv2d: dx[N,C,H,W] from (dy[N,K,P,Q], w[K,C/G,R,S]); attrs as conv2d + input_hw [H,W]";
    d.min_inputs = d.max_inputs = 2;
    d.parse = parse_with(parse_grad_data, "conv2d_grad_data");
    d.infer = infer_grad_data;
    d.cost = [](const void* params, std::span<const TensorType> in, std::span<const TensorType> out) {
      return conv_cost(data_geom(*static_cast<const Params*>(params), in[0], in[1]), in, out);
    };
    d.prepare = prepare_grad_data;
    d.cpu = grad_data_cpu;
    Attrs a = conv_attrs;
    a["input_hw"] = std::vector<int64_t>{6, 5};
    d.sample = OpSample{a, {dy, w}};
    registry.add(std::move(d));
  }
  {
    OpDef d;
    d.name = "conv2d_grad_weight";
    d.doc = "backward of conv2d: dw[K,C/G,R,S] from (dy[N,K,P,Q], x[N,C,H,W]); attrs as conv2d + kernel [R,S]";
    d.min_inputs = d.max_inputs = 2;
    d.parse = parse_with(parse_grad_weight, "conv2d_grad_weight");
    d.infer = infer_grad_weight;
    d.cost = [](const void* params, std::span<const TensorType> in, std::span<const TensorType> out) {
      return conv_cost(weight_geom(*static_cast<const Params*>(params), in[0], in[1]), in, out);
    };
    d.prepare = prepare_grad_weight;
    d.cpu = grad_weight_cpu;
    Attrs a = conv_attrs;
    a["kernel"] = std::vector<int64_t>{3, 2};
    d.sample = OpSample{a, {dy, x}};
    registry.add(std::move(d));
  }
  {
    OpDef d;
    d.name = "conv2d_grad_bias";
    d.traits.reduction = true;
    d.doc = "backward of conv2d's bias: db[K] = sum over n, p, q of dy[N,K,P,Q]";
    d.min_inputs = d.max_inputs = 1;
    d.infer = infer_grad_bias;
    d.cost = [](const void*, std::span<const TensorType> in, std::span<const TensorType> out) {
      return Cost{static_cast<double>(in[0].numel()), io_bytes(in, out)};
    };
    d.cpu = grad_bias_cpu;
    d.sample = OpSample{{}, {dy}};
    registry.add(std::move(d));
  }
}
