// Batch normalisation (Ioffe & Szegedy 2015) per channel C of x[N,C] or x[N,C,H,W] (any trailing
// dims: x is viewed as [N,C,L], L = H*W, M = N*L values per channel). Ops stay stateless: the batch
// statistics are explicit outputs, and the running statistics are updated by a separate op whose
// outputs the model builder records as state updates (a recompute never updates them twice).
//   batch_norm{eps=1e-5, training=true}(x, gamma[C], beta[C]) -> (y, mean[C], inv_std[C])
//       mean = sum x / M, var = sum (x - mean)^2 / M (biased), inv_std = 1 / sqrt(var + eps),
//       y = gamma * (x - mean) * inv_std + beta.  mean and inv_std are saved outputs. (y is
//       computed with gamma times inv_std rounded to x's type: what batch_norm_recompute repeats.)
//   batch_norm{training=false}(x, gamma, beta, running_mean[C], running_var[C]) -> y
//       y = gamma * (x - running_mean) / sqrt(running_var + eps) + beta
//   batch_norm_recompute{eps, training=true}(x, gamma, beta, mean, inv_std) -> y
//       batch_norm's y again from its saved statistics, bitwise. The op a recomputed copy of a
//       training batch_norm runs (OpDef::recompute_as): one pass over x instead of three; the
//       copy's backward reads the forward node's mean and inv_std.
//   batch_norm_grad(x, gamma, mean, inv_std, dy) -> (dx, dgamma[C], dbeta[C])
//       xhat = (x - mean) * inv_std, dbeta = sum dy, dgamma = sum dy * xhat,
//       dx = gamma * inv_std * (dy - dbeta / M - xhat * dgamma / M)
//   batch_norm_inference_grad{eps}(x, gamma, running_mean, running_var, dy) -> (dx, dgamma, dbeta)
//       dx = dy * gamma * inv_std_running, dgamma = sum dy * (x - running_mean) * inv_std_running
//   batch_norm_stats{momentum=0.1, eps, count}(running_mean, running_var, mean, inv_std)
//       -> (new_mean, new_var): PyTorch's update new = (1 - momentum) * old + momentum * batch, with
//       the batch variance made unbiased: max(1 / inv_std^2 - eps, 0) * count / (count - 1). eps
//       must be the batch_norm's. In place. (With float32 inv_std the recovered variance carries an
//       absolute error of about 1e-7 * (var + eps).)
// attr block (batch_norm, batch_norm_grad, batch_norm_inference_grad): 0, or 8/16 for a
// channel-blocked x [N,C/b,H,W,b] (ops/layout.cpp; the vectors stay [C]); the gradient nodes
// inherit it. Blocked sums are per image in order, then the images in order (double).
// A negative running variance (never produced by batch_norm_stats) is treated as 0.
// Reductions accumulate in double in a fixed order that depends only on the shape (see
// dsum), one channel per task, so results are bitwise reproducible.
#include <array>
#include <cstring>
#include <type_traits>
#include <utility>

#include "ops/batch_norm.h"
#include "ops/common.h"

namespace mnemo::ops {
namespace {

// Sums in double that vectorise and are bitwise reproducible: 16 partial sums (four vectors of 4
// doubles, GCC/Clang vector extensions) over blocks of 16 elements, a scalar tail, combined in a
// fixed order. The order depends only on the length, not on the address or the thread.
// f is generic: called on Vd (4 elements) in the blocks and on double in the tail.
using Vd = double __attribute__((vector_size(32)));
using Vf = float __attribute__((vector_size(16)));
template <class T>
inline Vd load4(const T* p) {
  if constexpr (std::is_same_v<T, double>) {
    Vd v;
    std::memcpy(&v, p, sizeof v);
    return v;
  } else {
    Vf v;
    std::memcpy(&v, p, sizeof v);
    return __builtin_convertvector(v, Vd);
  }
}
inline double combine(const Vd (&a)[4], double tail) {
  const Vd v = (a[0] + a[1]) + (a[2] + a[3]);
  return ((v[0] + v[2]) + (v[1] + v[3])) + tail;
}
template <class T, class F>  // sum of f(x[i])
inline double dsum(const T* x, int64_t len, F f) {
  Vd a[4] = {};
  int64_t i = 0;
  for (; i + 16 <= len; i += 16)
    for (int k = 0; k < 4; ++k) a[k] += f(load4(x + i + 4 * k));
  double tail = 0;
  for (; i < len; ++i) tail += f(static_cast<double>(x[i]));
  return combine(a, tail);
}
template <class T, class F>  // sums of f(x[i], y[i]) -> pair, added to s0, s1
inline void dsum2(const T* x, const T* y, int64_t len, double& s0, double& s1, F f) {
  Vd a[4] = {}, b[4] = {};
  int64_t i = 0;
  for (; i + 16 <= len; i += 16)
    for (int k = 0; k < 4; ++k) {
      const auto [u, v] = f(load4(x + i + 4 * k), load4(y + i + 4 * k));
      a[k] += u, b[k] += v;
    }
  double ta = 0, tb = 0;
  for (; i < len; ++i) {
    const auto [u, v] = f(static_cast<double>(x[i]), static_cast<double>(y[i]));
    ta += u, tb += v;
  }
  s0 += combine(a, ta);
  s1 += combine(b, tb);
}

struct Layout {  // x viewed as [n, c, l]
  int64_t n, c, l;
  int64_t offset(int64_t in, int64_t ic) const { return (in * c + ic) * l; }
};
Layout layout_of(const Shape& s) {
  int64_t l = 1;
  for (size_t i = 2; i < s.size(); ++i) l *= s[i];
  return {s[0], s[1], l};
}

inline double running_inv_std(double running_var, double eps) {
  return 1.0 / std::sqrt(std::max(running_var, 0.0) + eps);
}

// ---- params (ops/batch_norm.h) and inference ----

BatchNormParams parse_bn(AttrReader& r) {
  BatchNormParams p;
  p.eps = r.get_float("eps", 1e-5);
  p.training = r.get_bool("training", true);
  p.block = parse_block_attr(r);
  MNEMO_CHECK(p.eps > 0) << "eps must be positive, got " << p.eps;
  return p;
}
BatchNormParams parse_bn_grad(AttrReader& r) {
  BatchNormParams p;
  p.block = parse_block_attr(r);
  return p;
}
BatchNormParams parse_bn_inference_grad(AttrReader& r) {
  BatchNormParams p;
  p.eps = r.get_float("eps", 1e-5);
  p.training = false;
  p.block = parse_block_attr(r);
  MNEMO_CHECK(p.eps > 0) << "eps must be positive, got " << p.eps;
  return p;
}

StatsParams parse_stats(AttrReader& r) {
  StatsParams p;
  p.momentum = r.get_float("momentum", 0.1);
  p.eps = r.get_float("eps", 1e-5);
  p.count = r.require_int("count");
  MNEMO_CHECK(p.momentum >= 0 && p.momentum <= 1) << "momentum must be in [0, 1], got " << p.momentum;
  MNEMO_CHECK(p.eps > 0) << "eps must be positive, got " << p.eps;
  MNEMO_CHECK(p.count >= 2) << "count (values per channel, N*H*W) must be at least 2 for the unbiased "
                            << "variance, got " << p.count;
  return p;
}

// x: float, rank >= 2 (blocked: rank >= 4, last dim the block); each of `vecs` must be [C] of x's dtype.
void check_x_and_vectors(std::span<const TensorType> in, std::initializer_list<std::pair<int, const char*>> vecs,
                         int64_t block) {
  const TensorType& x = in[0];
  require_float(x, "x");
  if (block)
    MNEMO_CHECK(x.shape.size() >= 4 && x.shape.back() == block)
        << "with block " << block << ", x must be channel-blocked [N,C/" << block << ",H,W," << block << "], got " << x.str();
  else
    MNEMO_CHECK(x.shape.size() >= 2) << "x must be [N,C] or [N,C,H,W], got " << x.str();
  const TensorType want{x.dtype, {x.shape[1] * (block ? block : 1)}};
  for (const auto& [i, name] : vecs)
    MNEMO_CHECK(in[i] == want) << name << " must be " << want.str() << " (one per channel of x " << x.str()
                               << "), got " << in[i].str();
}

std::vector<TensorType> infer_bn(const void* params, std::span<const TensorType> in) {
  const auto& p = *static_cast<const BatchNormParams*>(params);
  const size_t want = p.training ? 3 : 5;
  MNEMO_CHECK(in.size() == want)
      << "batch_norm with training=" << (p.training ? "true" : "false") << " takes " << want << " inputs "
      << (p.training ? "(x, gamma, beta)" : "(x, gamma, beta, running_mean, running_var)") << ", got "
      << in.size();
  if (p.training) {
    check_x_and_vectors(in, {{1, "gamma"}, {2, "beta"}}, p.block);
    // One value per channel: its batch statistics are the value itself, y is beta and every
    // gradient but beta's is zero; it trained silently (PyTorch refuses it in training too).
    const int64_t channels = in[1].shape[0];
    MNEMO_CHECK(channels == 0 || in[0].numel() / channels >= 2)
        << "batch_norm in training needs more than one value per channel (N*H*W) for its batch statistics, got x "
        << in[0].str();
    return {in[0], in[1], in[1]};
  }
  check_x_and_vectors(in, {{1, "gamma"}, {2, "beta"}, {3, "running_mean"}, {4, "running_var"}}, p.block);
  return {in[0]};
}

std::vector<TensorType> infer_bn_recompute(const void* params, std::span<const TensorType> in) {
  const auto& p = *static_cast<const BatchNormParams*>(params);
  MNEMO_CHECK(p.training) << "batch_norm_recompute recomputes a training batch_norm: training must be true";
  check_x_and_vectors(in, {{1, "gamma"}, {2, "beta"}, {3, "mean"}, {4, "inv_std"}}, p.block);
  return {in[0]};
}

std::vector<TensorType> infer_bn_grad(const void* params, std::span<const TensorType> in) {
  check_x_and_vectors(in, {{1, "gamma"}, {2, "mean"}, {3, "inv_std"}}, static_cast<const BatchNormParams*>(params)->block);
  MNEMO_CHECK(in[4] == in[0]) << "dy must have x's type " << in[0].str() << ", got " << in[4].str();
  return {in[0], in[1], in[1]};
}

std::vector<TensorType> infer_bn_inference_grad(const void* params, std::span<const TensorType> in) {
  check_x_and_vectors(in, {{1, "gamma"}, {2, "running_mean"}, {3, "running_var"}},
                      static_cast<const BatchNormParams*>(params)->block);
  MNEMO_CHECK(in[4] == in[0]) << "dy must have x's type " << in[0].str() << ", got " << in[4].str();
  return {in[0], in[1], in[1]};
}

std::vector<TensorType> infer_stats(const void*, std::span<const TensorType> in) {
  require_float(in[0], "running_mean");
  MNEMO_CHECK(in[0].shape.size() == 1) << "running_mean must be [C], got " << in[0].str();
  const char* names[] = {"running_mean", "running_var", "mean", "inv_std"};
  for (int i = 1; i < 4; ++i)
    MNEMO_CHECK(in[i] == in[0]) << names[i] << " must be " << in[0].str() << " like running_mean, got "
                                << in[i].str();
  return {in[0], in[0]};
}

// ---- kernels ----

// y = (x - mt) * scale + b over channel ch's planes (not inlined: the forward and its recompute
// run this one compiled loop, so their results are the same bits).
template <class T>
[[gnu::noinline]] void plain_affine(const Layout& L, const T* x, T* y, int64_t ch, T mt, T scale, T b) {
  for (int64_t n = 0; n < L.n; ++n) {
    const T* xp = x + L.offset(n, ch);
    T* yp = y + L.offset(n, ch);
    for (int64_t i = 0; i < L.l; ++i) yp[i] = (xp[i] - mt) * scale + b;
  }
}

// gamma * inv_std as the forward and its recompute use it: from inv_std rounded to T (what is
// saved), so batch_norm_recompute gives the same y from the saved statistics.
template <class T>
T train_scale(T gamma, T inv_std) {
  return static_cast<T>(static_cast<double>(gamma) * static_cast<double>(inv_std));
}

template <class T>
void bn_train_forward(const KernelContext& c, double eps) {
  const Layout L = layout_of(c.in[0].shape());
  const T* x = c.in[0].as<T>();
  const T* gamma = c.in[1].as<T>();
  const T* beta = c.in[2].as<T>();
  T* y = c.out[0].as<T>();
  T* mean = c.out[1].as<T>();
  T* inv_std = c.out[2].as<T>();
  const double count = static_cast<double>(L.n * L.l);
  parallel_for(L.c, [&](int64_t ch) {
    double sum = 0;
    for (int64_t n = 0; n < L.n; ++n) {
      const T* xp = x + L.offset(n, ch);
      sum += dsum(xp, L.l, [](auto v) { return v; });
    }
    const double m = count > 0 ? sum / count : 0.0;
    double ss = 0;
    for (int64_t n = 0; n < L.n; ++n) {
      const T* xp = x + L.offset(n, ch);
      ss += dsum(xp, L.l, [m](auto v) {
        const auto d = v - m;
        return d * d;
      });
    }
    const double is = 1.0 / std::sqrt((count > 0 ? ss / count : 0.0) + eps);
    mean[ch] = static_cast<T>(m);
    inv_std[ch] = static_cast<T>(is);
    plain_affine<T>(L, x, y, ch, mean[ch], train_scale(gamma[ch], inv_std[ch]), beta[ch]);
  });
}

template <class T>
void bn_recompute_plain(const KernelContext& c) {  // (x, gamma, beta, mean, inv_std) -> y
  const Layout L = layout_of(c.in[0].shape());
  const T* gamma = c.in[1].as<T>();
  const T* beta = c.in[2].as<T>();
  const T* mean = c.in[3].as<T>();
  const T* inv_std = c.in[4].as<T>();
  parallel_for(L.c, [&](int64_t ch) {
    plain_affine<T>(L, c.in[0].as<T>(), c.out[0].as<T>(), ch, mean[ch], train_scale(gamma[ch], inv_std[ch]), beta[ch]);
  });
}

template <class T>
void bn_inference_forward(const KernelContext& c, double eps) {
  const Layout L = layout_of(c.in[0].shape());
  const T* x = c.in[0].as<T>();
  const T* gamma = c.in[1].as<T>();
  const T* beta = c.in[2].as<T>();
  const T* rmean = c.in[3].as<T>();
  const T* rvar = c.in[4].as<T>();
  T* y = c.out[0].as<T>();
  parallel_for(L.n * L.c, [&](int64_t plane) {
    const int64_t ch = plane % L.c;
    const T mt = rmean[ch];
    const T scale = static_cast<T>(static_cast<double>(gamma[ch]) * running_inv_std(rvar[ch], eps));
    const T b = beta[ch];
    const T* xp = x + plane * L.l;
    T* yp = y + plane * L.l;
    for (int64_t i = 0; i < L.l; ++i) yp[i] = (xp[i] - mt) * scale + b;
  });
}

// ---- channel-blocked kernels: x [N, CB, l, b], channel ch = cb*b + j at ((n*CB + cb)*l + i)*b + j ----

struct Blocked {
  int64_t n, cb, l;
  int64_t base(int64_t in, int64_t icb) const { return (in * cb + icb) * l; }  // times the block
};
Blocked blocked_of(const Shape& s) {
  int64_t l = 1;
  for (size_t i = 2; i + 1 < s.size(); ++i) l *= s[i];
  return {s[0], s[1], l};
}

template <class F>
void with_block(int64_t b, F&& f) {
  if (b == 8)
    f.template operator()<8>();
  else
    f.template operator()<16>();
}

// One slab ([l, kB] at p and q): per lane j, s0[j] and s1[j] = the sums of f(p - c[j], q) -> (u, v)
// (q 0 when null) over the l pixels, in double, in two interleaved chains (even and odd pixels,
// added at the end: a fixed order).
template <class T, int kB, class F>
inline void lane_sums(const T* __restrict p, const T* __restrict q, const double* __restrict c, int64_t l, double* s0,
                      double* s1, F f) {
  double a0[kB] = {}, a1[kB] = {}, b0[kB] = {}, b1[kB] = {};
  auto at = [&](int64_t i, int j) {
    return f(static_cast<double>(p[i * kB + j]) - c[j], q ? static_cast<double>(q[i * kB + j]) : 0.0);
  };
  int64_t i = 0;
  for (; i + 1 < l; i += 2)
    for (int j = 0; j < kB; ++j) {
      const auto [u0, v0] = at(i, j);
      const auto [u1, v1] = at(i + 1, j);
      a0[j] += u0, b0[j] += v0, a1[j] += u1, b1[j] += v1;
    }
  for (; i < l; ++i)
    for (int j = 0; j < kB; ++j) {
      const auto [u0, v0] = at(i, j);
      a0[j] += u0, b0[j] += v0;
    }
  for (int j = 0; j < kB; ++j) s0[j] = a0[j] + a1[j], s1[j] = b0[j] + b1[j];
}

// Per channel ch, the two sums of f(x - centre[ch], q) over the batch (centre 0 when empty; q: dy,
// or null): each slab (n, cb) sums its pixels into its own partials (lane_sums), then the images
// are added in order: the result depends only on the shape, not on the threads.
template <class T, int kB, class F>
std::pair<std::vector<double>, std::vector<double>> blocked_sums(const Blocked& B, const T* x, const T* q,
                                                                 const std::vector<double>& centre, F f) {
  const int64_t slabs = B.n * B.cb;
  std::vector<double> part(static_cast<size_t>(2 * slabs * kB), 0.0);
  parallel_for(slabs, [&](int64_t k) {
    const int64_t o = B.base(k / B.cb, k % B.cb) * kB;
    double c[kB] = {};  // the slab's channels' centres
    if (!centre.empty())
      for (int j = 0; j < kB; ++j) c[j] = centre[(k % B.cb) * kB + j];
    lane_sums<T, kB>(x + o, q ? q + o : nullptr, c, B.l, &part[2 * k * kB], &part[(2 * k + 1) * kB], f);
  });
  std::vector<double> s0(static_cast<size_t>(B.cb * kB), 0.0), s1(s0.size(), 0.0);
  for (int64_t k = 0; k < slabs; ++k)  // k = n*CB + cb: the images in order
    for (int j = 0; j < kB; ++j) {
      s0[(k % B.cb) * kB + j] += part[2 * k * kB + j];
      s1[(k % B.cb) * kB + j] += part[(2 * k + 1) * kB + j];
    }
  return {std::move(s0), std::move(s1)};
}

// out = (x - sub[ch]) * k1[ch] + k2[ch] (forward), or k1*dy + k2*(x - sub) + k3 (backward, dy set).
// The channel block's coefficients in local arrays and restrict pointers: the lane loop vectorises.
// (Not inlined: the forward and batch_norm_recompute run this one compiled loop, the same bits.)
template <class T, int kB>
[[gnu::noinline]] void blocked_affine(const Blocked& B, const T* x, const T* dy, T* out, const std::vector<T>& sub,
                                      const std::vector<T>& k1, const std::vector<T>& k2, const std::vector<T>& k3) {
  parallel_for(B.n * B.cb, [&](int64_t k) {
    const int64_t n = k / B.cb, cb = k % B.cb, o = B.base(n, cb) * kB;
    T sb[kB], a[kB], b[kB], c[kB];
    for (int j = 0; j < kB; ++j) sb[j] = sub[cb * kB + j], a[j] = k1[cb * kB + j], b[j] = k2[cb * kB + j];
    const T* __restrict xp = x + o;
    T* __restrict op = out + o;
    if (dy) {
      for (int j = 0; j < kB; ++j) c[j] = k3[cb * kB + j];
      const T* __restrict gp = dy + o;
      for (int64_t i = 0; i < B.l * kB; i += kB)
        for (int j = 0; j < kB; ++j) op[i + j] = a[j] * gp[i + j] + b[j] * (xp[i + j] - sb[j]) + c[j];
    } else {
      for (int64_t i = 0; i < B.l * kB; i += kB)
        for (int j = 0; j < kB; ++j) op[i + j] = (xp[i + j] - sb[j]) * a[j] + b[j];
    }
  });
}

template <class T, int kB>
void bn_train_forward_blocked(const KernelContext& c, double eps) {
  const Blocked B = blocked_of(c.in[0].shape());
  const T* x = c.in[0].as<T>();
  const T* gamma = c.in[1].as<T>();
  const T* beta = c.in[2].as<T>();
  const int64_t C = B.cb * kB;
  const double count = static_cast<double>(B.n * B.l);
  const std::vector<double> sum = blocked_sums<T, kB>(B, x, nullptr, {}, [](double v, double) { return std::pair{v, 0.0}; }).first;
  std::vector<double> m(static_cast<size_t>(C));
  for (int64_t ch = 0; ch < C; ++ch) m[ch] = count > 0 ? sum[ch] / count : 0.0;
  const std::vector<double> ss = blocked_sums<T, kB>(B, x, nullptr, m, [](double d, double) { return std::pair{d * d, 0.0}; }).first;
  std::vector<T> mt(C), scale(C), b(C), none;
  for (int64_t ch = 0; ch < C; ++ch) {
    const double is = 1.0 / std::sqrt((count > 0 ? ss[ch] / count : 0.0) + eps);
    c.out[1].as<T>()[ch] = mt[ch] = static_cast<T>(m[ch]);
    c.out[2].as<T>()[ch] = static_cast<T>(is);
    scale[ch] = train_scale(gamma[ch], c.out[2].as<T>()[ch]);
    b[ch] = beta[ch];
  }
  blocked_affine<T, kB>(B, x, nullptr, c.out[0].as<T>(), mt, scale, b, none);
}

template <class T, int kB>
void bn_recompute_blocked(const KernelContext& c) {
  const Blocked B = blocked_of(c.in[0].shape());
  const int64_t C = B.cb * kB;
  std::vector<T> mt(C), scale(C), b(C), none;
  for (int64_t ch = 0; ch < C; ++ch) {
    mt[ch] = c.in[3].as<T>()[ch];
    scale[ch] = train_scale(c.in[1].as<T>()[ch], c.in[4].as<T>()[ch]);
    b[ch] = c.in[2].as<T>()[ch];
  }
  blocked_affine<T, kB>(B, c.in[0].as<T>(), nullptr, c.out[0].as<T>(), mt, scale, b, none);
}

template <class T, int kB>
void bn_inference_forward_blocked(const KernelContext& c, double eps) {
  const Blocked B = blocked_of(c.in[0].shape());
  const T* gamma = c.in[1].as<T>();
  const T* rmean = c.in[3].as<T>();
  const T* rvar = c.in[4].as<T>();
  const int64_t C = B.cb * kB;
  std::vector<T> mt(C), scale(C), b(C), none;
  for (int64_t ch = 0; ch < C; ++ch) {
    mt[ch] = rmean[ch];
    scale[ch] = static_cast<T>(static_cast<double>(gamma[ch]) * running_inv_std(rvar[ch], eps));
    b[ch] = c.in[2].as<T>()[ch];
  }
  blocked_affine<T, kB>(B, c.in[0].as<T>(), nullptr, c.out[0].as<T>(), mt, scale, b, none);
}

// The blocked form of bn_backward below (same sums and coefficients).
template <class T, int kB, class Coeffs>
void bn_backward_blocked(const KernelContext& c, const T* mean, Coeffs coeffs) {
  const Blocked B = blocked_of(c.in[0].shape());
  const T* x = c.in[0].as<T>();
  const T* dy = c.in[4].as<T>();
  const int64_t C = B.cb * kB;
  const std::vector<double> centre(mean, mean + C);  // (as double)
  const auto [sdy, sdyx] = blocked_sums<T, kB>(B, x, dy, centre, [](double d, double g) { return std::pair{g, g * d}; });
  std::vector<T> mt(C), k1(C), k2(C), k3(C);
  for (int64_t ch = 0; ch < C; ++ch) {
    const auto [dg, k1d, k2d, k3d] = coeffs(ch, sdy[ch], sdyx[ch]);
    c.out[2].as<T>()[ch] = static_cast<T>(sdy[ch]);
    c.out[1].as<T>()[ch] = static_cast<T>(dg);
    mt[ch] = mean[ch], k1[ch] = static_cast<T>(k1d), k2[ch] = static_cast<T>(k2d), k3[ch] = static_cast<T>(k3d);
  }
  blocked_affine<T, kB>(B, x, dy, c.out[0].as<T>(), mt, k1, k2, k3);
}

void bn_forward_cpu(const KernelContext& c) {
  const auto& p = c.p<BatchNormParams>();
  dispatch_float(c.in[0].dtype(), "batch_norm", [&]<class T>() {
    if (p.block)
      with_block(p.block, [&]<int kB>() {
        if (p.training) bn_train_forward_blocked<T, kB>(c, p.eps);
        else bn_inference_forward_blocked<T, kB>(c, p.eps);
      });
    else if (p.training) bn_train_forward<T>(c, p.eps);
    else bn_inference_forward<T>(c, p.eps);
  });
}

void bn_recompute_cpu(const KernelContext& c) {
  const int64_t block = c.p<BatchNormParams>().block;
  dispatch_float(c.in[0].dtype(), "batch_norm_recompute", [&]<class T>() {
    if (block) with_block(block, [&]<int kB>() { bn_recompute_blocked<T, kB>(c); });
    else bn_recompute_plain<T>(c);
  });
}

// Shared backward: per channel, dbeta = sum dy, s = sum dy * (x - mean); then
// dx = k1 * dy + k2 * (x - mean) + k3. `coeffs(ch, dbeta, s)` returns {dgamma, k1, k2, k3}.
template <class T, class Coeffs>
void bn_backward(const KernelContext& c, const T* mean, Coeffs coeffs) {
  const Layout L = layout_of(c.in[0].shape());
  const T* x = c.in[0].as<T>();
  const T* dy = c.in[4].as<T>();
  T* dx = c.out[0].as<T>();
  T* dgamma = c.out[1].as<T>();
  T* dbeta = c.out[2].as<T>();
  parallel_for(L.c, [&](int64_t ch) {
    const T mt = mean[ch];
    const double m = static_cast<double>(mt);
    double sdy = 0, sdyx = 0;
    for (int64_t n = 0; n < L.n; ++n) {
      const T* xp = x + L.offset(n, ch);
      const T* dyp = dy + L.offset(n, ch);
      dsum2(xp, dyp, L.l, sdy, sdyx, [m](auto xv, auto g) { return std::pair{g, g * (xv - m)}; });
    }
    const auto [dg, k1d, k2d, k3d] = coeffs(ch, sdy, sdyx);
    dbeta[ch] = static_cast<T>(sdy);
    dgamma[ch] = static_cast<T>(dg);
    const T k1 = static_cast<T>(k1d), k2 = static_cast<T>(k2d), k3 = static_cast<T>(k3d);
    for (int64_t n = 0; n < L.n; ++n) {
      const T* xp = x + L.offset(n, ch);
      const T* dyp = dy + L.offset(n, ch);
      T* dxp = dx + L.offset(n, ch);
      for (int64_t i = 0; i < L.l; ++i) dxp[i] = k1 * dyp[i] + k2 * (xp[i] - mt) + k3;
    }
  });
}

// bn_backward, or its blocked form with `block`.
template <class T, class Coeffs>
void bn_backward_any(const KernelContext& c, int64_t block, const T* mean, Coeffs coeffs) {
  if (block)
    with_block(block, [&]<int kB>() { bn_backward_blocked<T, kB>(c, mean, coeffs); });
  else
    bn_backward<T>(c, mean, coeffs);
}

void bn_grad_cpu(const KernelContext& c) {  // in: x, gamma, mean, inv_std, dy
  const int64_t block = c.p<BatchNormParams>().block;
  dispatch_float(c.in[0].dtype(), "batch_norm_grad", [&]<class T>() {
    const int64_t channels = c.in[1].numel();  // values per channel (0 channels: no values)
    const double count = channels > 0 ? static_cast<double>(c.in[0].numel() / channels) : 0.0;
    const T* gamma = c.in[1].as<T>();
    const T* inv_std = c.in[3].as<T>();
    bn_backward_any<T>(c, block, c.in[2].as<T>(), [&](int64_t ch, double dbeta, double sdyx) {
      const double is = inv_std[ch], gi = static_cast<double>(gamma[ch]) * is;
      const double dgamma = sdyx * is;
      return std::array<double, 4>{dgamma, gi, -gi * is * dgamma / count, -gi * dbeta / count};
    });
  });
}

void bn_inference_grad_cpu(const KernelContext& c) {  // in: x, gamma, running_mean, running_var, dy
  const double eps = c.p<BatchNormParams>().eps;
  const int64_t block = c.p<BatchNormParams>().block;
  dispatch_float(c.in[0].dtype(), "batch_norm_inference_grad", [&]<class T>() {
    const T* gamma = c.in[1].as<T>();
    const T* rvar = c.in[3].as<T>();
    bn_backward_any<T>(c, block, c.in[2].as<T>(), [&](int64_t ch, double, double sdyx) {
      const double is = running_inv_std(rvar[ch], eps);
      return std::array<double, 4>{sdyx * is, static_cast<double>(gamma[ch]) * is, 0.0, 0.0};
    });
  });
}

void bn_stats_cpu(const KernelContext& c) {  // in: running_mean, running_var, mean, inv_std
  const auto& p = c.p<StatsParams>();
  dispatch_float(c.in[0].dtype(), "batch_norm_stats", [&]<class T>() {
    const T* rm = c.in[0].as<T>();
    const T* rv = c.in[1].as<T>();
    const T* mean = c.in[2].as<T>();
    const T* inv_std = c.in[3].as<T>();
    T* new_mean = c.out[0].as<T>();
    T* new_var = c.out[1].as<T>();
    const double m = p.momentum, unbias = static_cast<double>(p.count) / static_cast<double>(p.count - 1);
    for (int64_t ch = 0; ch < c.in[0].numel(); ++ch) {
      const double is = inv_std[ch];
      // The batch variance recovered from inv_std (>= 0: rounding may push a zero variance below).
      const double var = std::max(1.0 / (is * is) - p.eps, 0.0) * unbias;
      const double nm = (1 - m) * static_cast<double>(rm[ch]) + m * static_cast<double>(mean[ch]);
      const double nv = (1 - m) * static_cast<double>(rv[ch]) + m * var;
      new_mean[ch] = static_cast<T>(nm);  // rm[ch], rv[ch] are read before these writes (in place)
      new_var[ch] = static_cast<T>(nv);
    }
  });
}

// ---- grad and cost ----

std::vector<std::optional<EntryRef>> bn_grad(Graph& g, const GradContext& c) {
  const auto& p = c.p<BatchNormParams>();
  if (!c.dout[0]) return std::vector<std::optional<EntryRef>>(c.inputs.size(), std::nullopt);
  Attrs block;
  if (p.block) block["block"] = p.block;
  if (p.training) {
    const int id = g.add("batch_norm_grad", {c.inputs[0], c.inputs[1], c.outputs[1], c.outputs[2], *c.dout[0]}, std::move(block));
    return {EntryRef{id, 0}, EntryRef{id, 1}, EntryRef{id, 2}};
  }
  Attrs a = block;
  a["eps"] = p.eps;
  const int id = g.add("batch_norm_inference_grad", {c.inputs[0], c.inputs[1], c.inputs[3], c.inputs[4], *c.dout[0]}, std::move(a));
  return {EntryRef{id, 0}, EntryRef{id, 1}, EntryRef{id, 2}, std::nullopt, std::nullopt};
}

// flops per element of x; bytes: inputs + outputs + `extra_reads` more passes over x (and dy).
CostFn bn_cost(double flops, double extra_reads) {
  return [=](const void*, std::span<const TensorType> in, std::span<const TensorType> out) {
    const double n = static_cast<double>(in[0].numel());
    return Cost{flops * n, io_bytes(in, out) + extra_reads * static_cast<double>(in[0].bytes())};
  };
}
Cost bn_forward_cost(const void* params, std::span<const TensorType> in, std::span<const TensorType> out) {
  const bool training = static_cast<const BatchNormParams*>(params)->training;
  return bn_cost(training ? 7 : 2, training ? 2 : 0)(params, in, out);
}

TensorType f32(Shape s) { return TensorType{DType::f32, std::move(s)}; }

}  // namespace
}  // namespace mnemo::ops

MNEMO_REGISTER_OPS(batch_norm) {
  using namespace mnemo;
  using namespace mnemo::ops;
  const Shape xs{3, 3, 5, 6}, cs{3};
  {
    OpDef d;
    d.name = "batch_norm";
    d.traits.cheap_recompute = true;  // a few passes over x: cheap against the bytes its output holds
    d.doc = "y = gamma * (x - mean) / sqrt(var + eps) + beta per channel; training: batch statistics, "
            "outputs (y, mean, inv_std)";
    d.min_inputs = 3;
    d.max_inputs = 5;
    d.parse = parse_with(parse_bn, "batch_norm");
    d.infer = infer_bn;
    d.grad = bn_grad;
    d.saved_outputs = {1, 2};
    d.recompute_as = [](const void* p) -> const char* {
      return static_cast<const BatchNormParams*>(p)->training ? "batch_norm_recompute" : nullptr;
    };
    d.cost = bn_forward_cost;
    d.cpu = bn_forward_cpu;
    d.sample = OpSample{{}, {f32(xs), f32(cs), f32(cs)}};
    registry.add(std::move(d));
  }
  {
    OpDef d;
    d.name = "batch_norm_recompute";
    d.doc = "a training batch_norm's y again from its saved mean and inv_std, bitwise (what its recomputed copies run)";
    d.min_inputs = d.max_inputs = 5;
    d.parse = parse_with(parse_bn, "batch_norm_recompute");
    d.infer = infer_bn_recompute;
    d.cost = bn_cost(3, 0);  // one pass: read x, write y
    d.cpu = bn_recompute_cpu;
    d.sample = OpSample{{}, {f32(xs), f32(cs), f32(cs), f32(cs), f32(cs)}};
    registry.add(std::move(d));
  }
  {
    OpDef d;
    d.name = "batch_norm_grad";
    d.doc = "backward of batch_norm (training): (dx, dgamma, dbeta) from (x, gamma, mean, inv_std, dy)";
    d.min_inputs = d.max_inputs = 5;
    d.parse = parse_with(parse_bn_grad, "batch_norm_grad");
    d.infer = infer_bn_grad;
    d.cost = bn_cost(9, 2);
    d.cpu = bn_grad_cpu;
    d.sample = OpSample{{}, {f32({2, 3, 5, 6}), f32(cs), f32(cs), f32(cs), f32({2, 3, 5, 6})}};
    registry.add(std::move(d));
  }
  {
    OpDef d;
    d.name = "batch_norm_inference_grad";
    d.doc = "backward of batch_norm (training=false): (dx, dgamma, dbeta) from (x, gamma, running_mean, "
            "running_var, dy)";
    d.min_inputs = d.max_inputs = 5;
    d.parse = parse_with(parse_bn_inference_grad, "batch_norm_inference_grad");
    d.infer = infer_bn_inference_grad;
    d.cost = bn_cost(7, 2);
    d.cpu = bn_inference_grad_cpu;
    d.sample = OpSample{{}, {f32({2, 3, 5, 6}), f32(cs), f32(cs), f32(cs), f32({2, 3, 5, 6})}};
    registry.add(std::move(d));
  }
  {
    OpDef d;
    d.name = "batch_norm_stats";
    d.doc = "running statistics update: new = (1 - momentum) * old + momentum * batch (unbiased variance)";
    d.min_inputs = d.max_inputs = 4;
    d.parse = parse_with(parse_stats, "batch_norm_stats");
    d.infer = infer_stats;
    d.inplace = {{0, 0}, {1, 1}};
    d.cost = [](const void*, std::span<const TensorType> in, std::span<const TensorType> out) {
      return Cost{10.0 * static_cast<double>(in[0].numel()), io_bytes(in, out)};
    };
    d.cpu = bn_stats_cpu;
    d.sample = OpSample{{{"count", int64_t{60}}}, {f32(cs), f32(cs), f32(cs), f32(cs)}};
    registry.add(std::move(d));
  }
}
