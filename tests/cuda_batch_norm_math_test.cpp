// The maths of the CUDA batch-norm kernels (cuda/kernels/batch_norm_math.h), run on the host the
// way a GPU block runs it: 256 threads' partial sums one after another, then the same combining
// tree, then the same coefficient and elementwise functions; compared with the CPU ops of
// ops/batch_norm.cpp (and conv2d_grad_bias, whose CUDA kernel uses the same reduction). Needs no GPU.
// The reduction orders differ (the CPU sums 16 lanes of double, the GPU 256 strided threads), so
// double sums differ in the last bits and the float results by at most about one float ulp.
#include <cmath>
#include <vector>

#include "cuda/kernels/batch_norm_math.h"
#include "test_util.h"

namespace mnemo::test {
namespace {

namespace bn = mnemo::cuda::bn;
constexpr int kThreads = 256;  // the kernels' block (cuda/kernels/common.cuh)

struct Dims {
  int64_t n, c, l;
};
Dims dims_of(const Shape& s) {
  int64_t l = 1;
  for (size_t i = 2; i < s.size(); ++i) l *= s[i];
  return {s[0], s[1], l};
}

Tensor randf(Shape s, uint64_t seed, double scale = 1.0, double offset = 0.0) {
  return cast(rand64(std::move(s), seed, scale, offset), DType::f32);
}
Tensor positivef(Shape s, uint64_t seed) {
  Tensor t = rand64(std::move(s), seed);
  for (int64_t i = 0; i < t.numel(); ++i) set(t, i, 0.3 + std::abs(get(t, i)));
  return cast(t, DType::f32);
}

// One block's reduction: every thread's partial (from `partial(tid)`), then the tree.
template <class F>
double block_sum(F partial) {
  std::vector<double> v(kThreads);
  for (int tid = 0; tid < kThreads; ++tid) v[tid] = partial(tid);
  return bn::tree_reduce_host(v.data(), kThreads);
}

// Shapes covering L = 1 (x[N,C]), L below, at and above the block size, and M < 256.
const std::vector<Shape> kShapes = {{7, 3}, {300, 2}, {2, 3, 5, 6}, {3, 2, 16, 16}, {2, 2, 17, 19}, {1, 4, 1, 1}};

TEST(CudaBatchNormMath, ChannelWalkVisitsEveryElementOnce) {
  for (int64_t N : {0, 1, 3, 300}) {
    for (int64_t L : {0, 1, 5, 255, 256, 257, 1000}) {
      const int64_t C = 3;
      for (int64_t ch = 0; ch < C; ++ch) {
        std::vector<int> seen(static_cast<size_t>(N * C * L), 0);
        for (int tid = 0; tid < kThreads; ++tid) {
          int64_t last = -1;
          for (bn::ChannelWalk w(N, C, L, ch, tid, kThreads); w.valid(); w.next()) {
            const int64_t o = w.offset();
            ASSERT_GE(o, 0);
            ASSERT_LT(o, N * C * L);
            ASSERT_EQ((o / L) % C, ch) << "N=" << N << " L=" << L;
            ASSERT_EQ(w.n * L + w.i, w.j);  // (n, i) tracks j = tid + k * nthreads
            ASSERT_GT(o, last);
            last = o;
            ++seen[static_cast<size_t>(o)];
          }
        }
        for (int64_t o = 0; o < N * C * L; ++o)
          ASSERT_EQ(seen[static_cast<size_t>(o)], (o / L) % C == ch ? 1 : 0) << "N=" << N << " L=" << L << " o=" << o;
      }
    }
  }
}

TEST(CudaBatchNormMath, TreeMatchesPairwiseOrder) {
  std::vector<double> v(kThreads);
  for (int i = 0; i < kThreads; ++i) v[i] = 1.0 / (i + 1);
  // The tree adds v[t] and v[t + 128], then those at distance 64, ...: recompute that directly.
  std::vector<double> w = v;
  for (int s = kThreads / 2; s > 0; s /= 2)
    for (int t = 0; t < s; ++t) w[t] = w[t] + w[t + s];
  EXPECT_EQ(bn::tree_reduce_host(v.data(), kThreads), w[0]);
}

TEST(CudaBatchNormMath, TrainForwardMatchesCpuOp) {
  uint64_t seed = 1;
  for (const Shape& s : kShapes) {
    const Dims d = dims_of(s);
    const Tensor x = randf(s, seed++, 2.0, 0.5), gamma = randf({d.c}, seed++), beta = randf({d.c}, seed++);
    const double eps = 1e-5;
    auto cpu = run("batch_norm", {&x, &gamma, &beta}, {{"eps", eps}});
    Tensor y(DType::f32, s), mean(DType::f32, {d.c}), inv_std(DType::f32, {d.c});
    const float* xp = x.as<float>();
    const double count = static_cast<double>(d.n * d.l);
    for (int64_t ch = 0; ch < d.c; ++ch) {
      const double m =
          bn::mean_of(block_sum([&](int t) { return bn::partial_sum(xp, d.n, d.c, d.l, ch, t, kThreads); }), count);
      const double is = bn::inv_std_of(
          block_sum([&](int t) { return bn::partial_sq_dev(xp, d.n, d.c, d.l, ch, m, t, kThreads); }), count, eps);
      mean.as<float>()[ch] = static_cast<float>(m);
      inv_std.as<float>()[ch] = static_cast<float>(is);
      const float mt = static_cast<float>(m), scale = bn::scale_of(gamma.as<float>()[ch], is), b = beta.as<float>()[ch];
      for (int tid = 0; tid < kThreads; ++tid)
        for (bn::ChannelWalk w(d.n, d.c, d.l, ch, tid, kThreads); w.valid(); w.next())
          y.as<float>()[w.offset()] = bn::normalize(xp[w.offset()], mt, scale, b);
    }
    EXPECT_LT(max_rel_diff(mean, cpu[1]), 1e-6) << shape_str(s);
    EXPECT_LT(max_rel_diff(inv_std, cpu[2]), 1e-6) << shape_str(s);
    EXPECT_LT(max_rel_diff(y, cpu[0]), 1e-6) << shape_str(s);
  }
}

TEST(CudaBatchNormMath, InferenceForwardMatchesCpuOp) {
  uint64_t seed = 100;
  for (const Shape& s : kShapes) {
    const Dims d = dims_of(s);
    const Tensor x = randf(s, seed++), gamma = randf({d.c}, seed++), beta = randf({d.c}, seed++);
    const Tensor rm = randf({d.c}, seed++), rv = positivef({d.c}, seed++);
    const double eps = 1e-3;
    auto cpu = run("batch_norm", {&x, &gamma, &beta, &rm, &rv}, {{"eps", eps}, {"training", false}});
    Tensor y(DType::f32, s);
    for (int64_t ch = 0; ch < d.c; ++ch) {
      const float mt = rm.as<float>()[ch];
      const float scale =
          bn::scale_of(gamma.as<float>()[ch], bn::running_inv_std(static_cast<double>(rv.as<float>()[ch]), eps));
      for (int tid = 0; tid < kThreads; ++tid)
        for (bn::ChannelWalk w(d.n, d.c, d.l, ch, tid, kThreads); w.valid(); w.next())
          y.as<float>()[w.offset()] = bn::normalize(x.as<float>()[w.offset()], mt, scale, beta.as<float>()[ch]);
    }
    // Same operations in the same order per element: bitwise equal.
    EXPECT_TRUE(bitwise_equal(y, cpu[0])) << shape_str(s) << " max rel diff " << max_rel_diff(y, cpu[0]);
  }
}

// Emulates backward_kernel; inference selects batch_norm_inference_grad's coefficients.
std::vector<Tensor> emulate_backward(const Tensor& x, const Tensor& gamma, const Tensor& mean, const Tensor& stat,
                                     const Tensor& dy, bool inference, double eps) {
  const Dims d = dims_of(x.shape());
  std::vector<Tensor> out;
  out.emplace_back(DType::f32, x.shape());
  out.emplace_back(DType::f32, Shape{d.c});
  out.emplace_back(DType::f32, Shape{d.c});
  const float *xp = x.as<float>(), *dyp = dy.as<float>();
  const double count = static_cast<double>(d.n * d.l);
  for (int64_t ch = 0; ch < d.c; ++ch) {
    const float mt = mean.as<float>()[ch];
    std::vector<double> a(kThreads), b(kThreads);
    for (int tid = 0; tid < kThreads; ++tid)
      bn::partial_grad_sums(xp, dyp, d.n, d.c, d.l, ch, static_cast<double>(mt), tid, kThreads, &a[tid], &b[tid]);
    const double sdy = bn::tree_reduce_host(a.data(), kThreads), sdyx = bn::tree_reduce_host(b.data(), kThreads);
    double k[4];
    if (inference)
      bn::inference_grad_coeffs(sdyx, gamma.as<float>()[ch], stat.as<float>()[ch], eps, k);
    else
      bn::grad_coeffs(sdy, sdyx, gamma.as<float>()[ch], stat.as<float>()[ch], count, k);
    out[2].as<float>()[ch] = static_cast<float>(sdy);
    out[1].as<float>()[ch] = static_cast<float>(k[0]);
    const float k1 = static_cast<float>(k[1]), k2 = static_cast<float>(k[2]), k3 = static_cast<float>(k[3]);
    for (int tid = 0; tid < kThreads; ++tid)
      for (bn::ChannelWalk w(d.n, d.c, d.l, ch, tid, kThreads); w.valid(); w.next())
        out[0].as<float>()[w.offset()] = bn::grad_x(k1, k2, k3, dyp[w.offset()], xp[w.offset()], mt);
  }
  return out;
}

TEST(CudaBatchNormMath, BackwardMatchesCpuOp) {
  uint64_t seed = 200;
  for (const Shape& s : kShapes) {
    const Dims d = dims_of(s);
    const Tensor x = randf(s, seed++, 1.5, -0.3), dy = randf(s, seed++), gamma = randf({d.c}, seed++);
    // Statistics from the forward op, as in training.
    const Tensor beta = randf({d.c}, seed++);
    auto fwd = run("batch_norm", {&x, &gamma, &beta});
    auto cpu = run("batch_norm_grad", {&x, &gamma, &fwd[1], &fwd[2], &dy});
    auto gpu = emulate_backward(x, gamma, fwd[1], fwd[2], dy, false, 0.0);
    // dx = k1 dy + k2 (x - mean) + k3 cancels (its channel sum is 0): compare on the scale of dy.
    EXPECT_LT(max_rel_diff(gpu[0], cpu[0]), 1e-5) << shape_str(s);
    EXPECT_LT(max_rel_diff(gpu[1], cpu[1]), 1e-6) << shape_str(s);
    EXPECT_LT(max_rel_diff(gpu[2], cpu[2]), 1e-6) << shape_str(s);
  }
}

TEST(CudaBatchNormMath, InferenceBackwardMatchesCpuOp) {
  uint64_t seed = 300;
  for (const Shape& s : kShapes) {
    const Dims d = dims_of(s);
    const Tensor x = randf(s, seed++), dy = randf(s, seed++), gamma = randf({d.c}, seed++);
    const Tensor rm = randf({d.c}, seed++), rv = positivef({d.c}, seed++);
    const double eps = 1e-4;
    auto cpu = run("batch_norm_inference_grad", {&x, &gamma, &rm, &rv, &dy}, {{"eps", eps}});
    auto gpu = emulate_backward(x, gamma, rm, rv, dy, true, eps);
    EXPECT_TRUE(bitwise_equal(gpu[0], cpu[0])) << shape_str(s);  // no reduction in dx: same operations
    EXPECT_LT(max_rel_diff(gpu[1], cpu[1]), 1e-6) << shape_str(s);
    EXPECT_LT(max_rel_diff(gpu[2], cpu[2]), 1e-6) << shape_str(s);
  }
}

TEST(CudaBatchNormMath, StatsMatchCpuOpBitwise) {
  const int64_t C = 9, count = 60;
  Tensor rm = randf({C}, 400), rv = positivef({C}, 401), mean = randf({C}, 402), inv_std = positivef({C}, 403);
  inv_std.as<float>()[0] = 1e3f;  // 1 / inv_std^2 below eps: the variance clamps to 0
  rv.as<float>()[1] = -0.5f;
  const double momentum = 0.25, eps = 1e-5;
  auto cpu = run("batch_norm_stats", {&rm, &rv, &mean, &inv_std},
                 {{"momentum", momentum}, {"eps", eps}, {"count", count}});
  Tensor nm(DType::f32, {C}), nv(DType::f32, {C});
  const double unbias = static_cast<double>(count) / static_cast<double>(count - 1);
  for (int64_t ch = 0; ch < C; ++ch)
    bn::stats_update(rm.as<float>()[ch], rv.as<float>()[ch], mean.as<float>()[ch], inv_std.as<float>()[ch], momentum,
                     eps, unbias, &nm.as<float>()[ch], &nv.as<float>()[ch]);
  EXPECT_TRUE(bitwise_equal(nm, cpu[0]));
  EXPECT_TRUE(bitwise_equal(nv, cpu[1]));
}

TEST(CudaBatchNormMath, ConvBiasGradMatchesCpuOp) {  // cuda/kernels/conv2d.cu uses the same reduction
  uint64_t seed = 500;
  for (const Shape& s : std::vector<Shape>{{2, 4, 3, 5}, {5, 3, 16, 17}, {1, 2, 1, 1}}) {
    const Tensor dy = randf(s, seed++);
    auto cpu = run("conv2d_grad_bias", {&dy});
    const Dims d = dims_of(s);
    Tensor db(DType::f32, {d.c});
    for (int64_t k = 0; k < d.c; ++k)
      db.as<float>()[k] = static_cast<float>(
          block_sum([&](int t) { return bn::partial_sum(dy.as<float>(), d.n, d.c, d.l, k, t, kThreads); }));
    EXPECT_LT(max_rel_diff(db, cpu[0]), 1e-6) << shape_str(s);
  }
}

}  // namespace
}  // namespace mnemo::test
