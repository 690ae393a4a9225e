// The maths of the CUDA batch-norm kernels (cuda/kernels/batch_norm_math.h), run on the host the
// way the GPU runs it: each channel's reduction split over P blocks (block (ch, p) owns a contiguous
// range of the channel's elements; its 256 threads' partial sums one after another, then the same
// combining tree), the P block sums added in order p = 0..P-1, then the same coefficient functions
// and the flat elementwise pass; compared with the CPU ops of ops/batch_norm.cpp (and
// conv2d_grad_bias, whose CUDA kernel uses the same reduction) for several P, including the
// kernels' own choice bn::split_parts. Needs no GPU.
// The reduction orders differ (the CPU sums 16 lanes of double, the GPU 256 strided threads per
// part), so double sums differ in the last bits and the float results by at most about one float ulp.
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
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

// A channel's reduction split over P blocks: block p's sum of `partial(range, tid)` over its
// threads, then the P block sums combined in order (the combine kernels).
template <class F>
double split_sum(int64_t M, int64_t P, F partial) {
  std::vector<double> part(static_cast<size_t>(P));
  for (int64_t p = 0; p < P; ++p) {
    const bn::Range r = bn::part_range(M, P, p);
    part[static_cast<size_t>(p)] = block_sum([&](int t) { return partial(r, t); });
  }
  return bn::combine_parts(part.data(), P);
}

// The elementwise passes: every flat offset o of [N, C, L] with its channel, checked against the
// 32-bit variant the kernels use for small tensors.
template <class F>
void for_each_element(const Dims& d, F f) {
  const int64_t total = d.n * d.c * d.l;
  for (int64_t o = 0; o < total; ++o) {
    const int64_t ch = bn::channel_of<int64_t>(o, d.c, d.l);
    ASSERT_EQ(static_cast<int64_t>(bn::channel_of<uint32_t>(static_cast<uint32_t>(o), static_cast<uint32_t>(d.c),
                                                            static_cast<uint32_t>(d.l))),
              ch);
    f(o, ch);
  }
}

// The part counts to emulate for a shape: 1, 2, 7 and the kernels' own choice.
std::vector<int64_t> parts_for(const Dims& d) {
  std::vector<int64_t> ps = {1, 2, 7};
  const int64_t own = bn::split_parts(d.n, d.c, d.l);
  if (std::find(ps.begin(), ps.end(), own) == ps.end()) ps.push_back(own);
  return ps;
}

// Shapes covering L = 1 (x[N,C]), L below, at and above the block size, M < 256, M not divisible
// by P, M < P * 256, parts of more than 256 elements, and one whose split_parts is 2. (Not one
// value per channel: a training batch norm refuses it.)
const std::vector<Shape> kShapes = {{7, 3},        {300, 2},       {2, 3, 5, 6},   {3, 2, 16, 16},
                                    {2, 2, 17, 19}, {2, 4, 1, 1}, {5, 2, 23, 29}, {2, 1, 128, 130}};

TEST(CudaBatchNormMath, SplitPartsFormula) {
  EXPECT_EQ(bn::split_parts(64, 64, 112 * 112), 9);   // ResNet-50 stem, batch 64: 576 blocks
  EXPECT_EQ(bn::split_parts(64, 256, 56 * 56), 3);
  EXPECT_EQ(bn::split_parts(64, 512, 28 * 28), 2);
  EXPECT_EQ(bn::split_parts(64, 1024, 14 * 14), 1);
  EXPECT_EQ(bn::split_parts(64, 2048, 7 * 7), 1);
  EXPECT_EQ(bn::split_parts(2, 1, 128 * 130), 2);
  EXPECT_EQ(bn::split_parts(1 << 20, 1, 1 << 10), bn::kSplitTargetBlocks);  // the largest P
  EXPECT_EQ(bn::split_parts(0, 3, 5), 1);
  EXPECT_EQ(bn::split_parts(3, 3, 0), 1);
  EXPECT_EQ(bn::split_parts(3, 0, 5), 1);
  for (int64_t N : {1, 2, 7, 64, 256})
    for (int64_t C : {1, 3, 64, 100, 527, 528, 529, 4096})
      for (int64_t L : {1, 49, 196, 3136, 12544, 100000}) {
        const int64_t P = bn::split_parts(N, C, L), M = N * L;
        ASSERT_GE(P, 1);
        ASSERT_LE(P, bn::kSplitTargetBlocks);
        if (P > 1) {
          ASSERT_GE(M / P, bn::kSplitMinElements) << N << " " << C << " " << L;
          ASSERT_LE(C * (P - 1), bn::kSplitTargetBlocks) << N << " " << C << " " << L;  // no more than needed
        }
        if (M < 2 * bn::kSplitMinElements || C >= bn::kSplitTargetBlocks) {
          ASSERT_EQ(P, 1);
        }
        if (M / bn::kSplitMinElements >= bn::kSplitTargetBlocks) {  // long channels: enough blocks
          ASSERT_GE(C * P, bn::kSplitTargetBlocks);
        }
      }
}

TEST(CudaBatchNormMath, PartRangesTileTheChannel) {
  for (int64_t M : {0, 1, 5, 60, 255, 256, 257, 1000, 33280})
    for (int64_t P : {1, 2, 3, 7, 9, 64}) {
      int64_t next = 0;
      for (int64_t p = 0; p < P; ++p) {
        const bn::Range r = bn::part_range(M, P, p);
        ASSERT_EQ(r.begin, next) << M << " " << P << " " << p;
        ASSERT_GE(r.end - r.begin, M / P);
        ASSERT_LE(r.end - r.begin, M / P + 1);
        next = r.end;
      }
      ASSERT_EQ(next, M);
    }
}

TEST(CudaBatchNormMath, ChannelWalkVisitsEveryElementOnce) {
  for (int64_t N : {0, 1, 3, 300}) {
    for (int64_t L : {0, 1, 5, 255, 256, 257, 1000}) {
      const int64_t C = 3, M = N * L;
      for (int64_t P : {int64_t{1}, int64_t{2}, int64_t{7}, bn::split_parts(N, C, L)}) {
        for (int64_t ch = 0; ch < C; ++ch) {
          std::vector<int> seen(static_cast<size_t>(N * C * L), 0);
          for (int64_t p = 0; p < P; ++p) {
            const bn::Range r = bn::part_range(M, P, p);
            for (int tid = 0; tid < kThreads; ++tid) {
              int64_t last = -1, k = 0;
              for (bn::ChannelWalk w(N, C, L, ch, r, tid, kThreads); w.valid(); w.next(), ++k) {
                const int64_t o = w.offset();
                ASSERT_GE(o, 0);
                ASSERT_LT(o, N * C * L);
                ASSERT_EQ((o / L) % C, ch) << "N=" << N << " L=" << L;
                ASSERT_EQ(w.j, r.begin + tid + k * kThreads);  // e = begin + tid + k * nthreads, in order
                ASSERT_LT(w.j, r.end);
                ASSERT_EQ(w.n * L + w.i, w.j);  // (n, i) tracks e
                ASSERT_EQ(o, (w.j / L) * C * L + ch * L + w.j % L);
                ASSERT_GT(o, last);
                last = o;
                ++seen[static_cast<size_t>(o)];
              }
            }
          }
          for (int64_t o = 0; o < N * C * L; ++o)
            ASSERT_EQ(seen[static_cast<size_t>(o)], (o / L) % C == ch ? 1 : 0)
                << "N=" << N << " L=" << L << " P=" << P << " o=" << o;
        }
      }
    }
  }
}

TEST(CudaBatchNormMath, ChannelOfMatchesLayout) {
  for (const Shape& s : kShapes) {
    const Dims d = dims_of(s);
    std::vector<int> seen(static_cast<size_t>(d.n * d.c * d.l), 0);
    for (int64_t n = 0; n < d.n; ++n)
      for (int64_t c = 0; c < d.c; ++c)
        for (int64_t l = 0; l < d.l; ++l) {
          const int64_t o = (n * d.c + c) * d.l + l;
          ASSERT_EQ(bn::channel_of<int64_t>(o, d.c, d.l), c);
          ++seen[static_cast<size_t>(o)];
        }
    for_each_element(d, [&](int64_t o, int64_t) { ASSERT_EQ(seen[static_cast<size_t>(o)], 1); });
  }
}

TEST(CudaBatchNormMath, WorkspaceLayoutIsDisjoint) {
  for (int64_t C : {1, 3, 64})
    for (int64_t P : {1, 2, 7}) {
      const bn::WorkspaceLayout w = bn::workspace_layout(C, P);
      EXPECT_EQ(w.coef, 0);
      EXPECT_EQ(bn::coef_doubles(C) * 2, 4 * C);  // 4 floats per channel
      EXPECT_EQ(w.mean, w.coef + bn::coef_doubles(C));
      EXPECT_EQ(w.part_a, w.mean + C);
      EXPECT_EQ(w.part_b, w.part_a + C * P);
      EXPECT_EQ(w.total, w.part_b + C * P);
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

TEST(CudaBatchNormMath, CombineIsInOrder) {
  const double part[4] = {1e16, 1.0, -1e16, 1.0};
  EXPECT_EQ(bn::combine_parts(part, 4), ((1e16 + 1.0) - 1e16) + 1.0);
  EXPECT_EQ(bn::combine_parts(part + 1, 1), 1.0);
}

// Emulates batch_norm_train_forward with P parts per channel: (y, mean, inv_std).
std::vector<Tensor> emulate_train_forward(const Tensor& x, const Tensor& gamma, const Tensor& beta, double eps,
                                          int64_t P) {
  const Dims d = dims_of(x.shape());
  std::vector<Tensor> out;
  out.emplace_back(DType::f32, x.shape());
  out.emplace_back(DType::f32, Shape{d.c});
  out.emplace_back(DType::f32, Shape{d.c});
  const float* xp = x.as<float>();
  const int64_t M = d.n * d.l;
  const double count = static_cast<double>(M);
  std::vector<float> coef(static_cast<size_t>(4 * d.c));
  for (int64_t ch = 0; ch < d.c; ++ch) {
    const double m = bn::mean_of(
        split_sum(M, P, [&](bn::Range r, int t) { return bn::partial_sum(xp, d.n, d.c, d.l, ch, r, t, kThreads); }),
        count);
    const double is = bn::inv_std_of(split_sum(M, P,
                                               [&](bn::Range r, int t) {
                                                 return bn::partial_sq_dev(xp, d.n, d.c, d.l, ch, r, m, t, kThreads);
                                               }),
                                     count, eps);
    out[1].as<float>()[ch] = static_cast<float>(m);
    out[2].as<float>()[ch] = static_cast<float>(is);
    coef[4 * ch + 0] = static_cast<float>(m);
    coef[4 * ch + 1] = bn::scale_of(gamma.as<float>()[ch], static_cast<double>(out[2].as<float>()[ch]));
    coef[4 * ch + 2] = beta.as<float>()[ch];
  }
  for_each_element(d, [&](int64_t o, int64_t ch) {
    const float* k = &coef[static_cast<size_t>(4 * ch)];
    out[0].as<float>()[o] = bn::normalize(xp[o], k[0], k[1], k[2]);
  });
  return out;
}

// batch_norm_recompute's kernels on the host: the coefficients from the saved statistics
// (recompute_coef_kernel), then the same elementwise pass.
Tensor emulate_recompute(const Tensor& x, const Tensor& gamma, const Tensor& beta, const Tensor& mean, const Tensor& inv_std) {
  const Dims d = dims_of(x.shape());
  Tensor y(DType::f32, x.shape());
  std::vector<float> coef(static_cast<size_t>(4 * d.c));
  for (int64_t ch = 0; ch < d.c; ++ch) {
    coef[4 * ch + 0] = mean.as<float>()[ch];
    coef[4 * ch + 1] = bn::scale_of(gamma.as<float>()[ch], static_cast<double>(inv_std.as<float>()[ch]));
    coef[4 * ch + 2] = beta.as<float>()[ch];
  }
  for_each_element(d, [&](int64_t o, int64_t ch) {
    const float* k = &coef[static_cast<size_t>(4 * ch)];
    y.as<float>()[o] = bn::normalize(x.as<float>()[o], k[0], k[1], k[2]);
  });
  return y;
}

TEST(CudaBatchNormMath, TrainForwardMatchesCpuOp) {
  uint64_t seed = 1;
  for (const Shape& s : kShapes) {
    const Dims d = dims_of(s);
    const Tensor x = randf(s, seed++, 2.0, 0.5), gamma = randf({d.c}, seed++), beta = randf({d.c}, seed++);
    const double eps = 1e-5;
    auto cpu = run("batch_norm", {&x, &gamma, &beta}, {{"eps", eps}});
    for (int64_t P : parts_for(d)) {
      auto gpu = emulate_train_forward(x, gamma, beta, eps, P);
      EXPECT_LT(max_rel_diff(gpu[1], cpu[1]), 1e-6) << shape_str(s) << " P=" << P;
      EXPECT_LT(max_rel_diff(gpu[2], cpu[2]), 1e-6) << shape_str(s) << " P=" << P;
      EXPECT_LT(max_rel_diff(gpu[0], cpu[0]), 1e-6) << shape_str(s) << " P=" << P;
    }
  }
}

// The CUDA recompute from the saved statistics gives the CUDA forward's y bitwise (the same
// coefficients, and one elementwise kernel for both), and the CPU recompute's to 1e-6 (the CPU op
// and the device may contract (x - mean) * scale + beta differently).
TEST(CudaBatchNormMath, RecomputeFromSavedStatisticsIsTheForward) {
  uint64_t seed = 50;
  for (const Shape& s : kShapes) {
    const Dims d = dims_of(s);
    const Tensor x = randf(s, seed++, 2.0, 0.5), gamma = randf({d.c}, seed++), beta = randf({d.c}, seed++);
    for (int64_t P : parts_for(d)) {
      auto gpu = emulate_train_forward(x, gamma, beta, 1e-5, P);
      const Tensor y = emulate_recompute(x, gamma, beta, gpu[1], gpu[2]);
      EXPECT_EQ(std::memcmp(y.data(), gpu[0].data(), y.bytes()), 0) << shape_str(s) << " P=" << P;
      const auto cpu = run("batch_norm_recompute", {&x, &gamma, &beta, &gpu[1], &gpu[2]});
      EXPECT_LT(max_rel_diff(y, cpu[0]), 1e-6) << shape_str(s) << " P=" << P;
    }
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
    // inference_coef_kernel, then normalize_kernel.
    std::vector<float> coef(static_cast<size_t>(4 * d.c));
    for (int64_t ch = 0; ch < d.c; ++ch) {
      coef[4 * ch + 0] = rm.as<float>()[ch];
      coef[4 * ch + 1] =
          bn::scale_of(gamma.as<float>()[ch], bn::running_inv_std(static_cast<double>(rv.as<float>()[ch]), eps));
      coef[4 * ch + 2] = beta.as<float>()[ch];
    }
    Tensor y(DType::f32, s);
    for_each_element(d, [&](int64_t o, int64_t ch) {
      const float* k = &coef[static_cast<size_t>(4 * ch)];
      y.as<float>()[o] = bn::normalize(x.as<float>()[o], k[0], k[1], k[2]);
    });
    // Same operations in the same order per element: bitwise equal.
    EXPECT_TRUE(bitwise_equal(y, cpu[0])) << shape_str(s) << " max rel diff " << max_rel_diff(y, cpu[0]);
  }
}

// Emulates the backward launchers with P parts per channel; inference selects
// batch_norm_inference_grad's coefficients.
std::vector<Tensor> emulate_backward(const Tensor& x, const Tensor& gamma, const Tensor& mean, const Tensor& stat,
                                     const Tensor& dy, bool inference, double eps, int64_t P) {
  const Dims d = dims_of(x.shape());
  std::vector<Tensor> out;
  out.emplace_back(DType::f32, x.shape());
  out.emplace_back(DType::f32, Shape{d.c});
  out.emplace_back(DType::f32, Shape{d.c});
  const float *xp = x.as<float>(), *dyp = dy.as<float>();
  const int64_t M = d.n * d.l;
  const double count = static_cast<double>(M);
  std::vector<float> coef(static_cast<size_t>(4 * d.c));
  for (int64_t ch = 0; ch < d.c; ++ch) {  // grad_parts_kernel, then grad_coef_kernel
    const float mt = mean.as<float>()[ch];
    std::vector<double> part_a(static_cast<size_t>(P)), part_b(static_cast<size_t>(P));
    for (int64_t p = 0; p < P; ++p) {
      const bn::Range r = bn::part_range(M, P, p);
      std::vector<double> a(kThreads), b(kThreads);
      for (int tid = 0; tid < kThreads; ++tid)
        bn::partial_grad_sums(xp, dyp, d.n, d.c, d.l, ch, r, static_cast<double>(mt), tid, kThreads, &a[tid],
                              &b[tid]);
      part_a[static_cast<size_t>(p)] = bn::tree_reduce_host(a.data(), kThreads);
      part_b[static_cast<size_t>(p)] = bn::tree_reduce_host(b.data(), kThreads);
    }
    const double sdy = bn::combine_parts(part_a.data(), P), sdyx = bn::combine_parts(part_b.data(), P);
    double k[4];
    if (inference)
      bn::inference_grad_coeffs(sdyx, gamma.as<float>()[ch], stat.as<float>()[ch], eps, k);
    else
      bn::grad_coeffs(sdy, sdyx, gamma.as<float>()[ch], stat.as<float>()[ch], count, k);
    out[2].as<float>()[ch] = static_cast<float>(sdy);
    out[1].as<float>()[ch] = static_cast<float>(k[0]);
    coef[4 * ch + 0] = static_cast<float>(k[1]);
    coef[4 * ch + 1] = static_cast<float>(k[2]);
    coef[4 * ch + 2] = static_cast<float>(k[3]);
    coef[4 * ch + 3] = mt;
  }
  for_each_element(d, [&](int64_t o, int64_t ch) {  // grad_x_kernel
    const float* k = &coef[static_cast<size_t>(4 * ch)];
    out[0].as<float>()[o] = bn::grad_x(k[0], k[1], k[2], dyp[o], xp[o], k[3]);
  });
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
    for (int64_t P : parts_for(d)) {
      auto gpu = emulate_backward(x, gamma, fwd[1], fwd[2], dy, false, 0.0, P);
      // dx = k1 dy + k2 (x - mean) + k3 cancels (its channel sum is 0): compare on the scale of dy.
      EXPECT_LT(max_rel_diff(gpu[0], cpu[0]), 1e-5) << shape_str(s) << " P=" << P;
      EXPECT_LT(max_rel_diff(gpu[1], cpu[1]), 1e-6) << shape_str(s) << " P=" << P;
      EXPECT_LT(max_rel_diff(gpu[2], cpu[2]), 1e-6) << shape_str(s) << " P=" << P;
    }
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
    for (int64_t P : parts_for(d)) {
      auto gpu = emulate_backward(x, gamma, rm, rv, dy, true, eps, P);
      EXPECT_TRUE(bitwise_equal(gpu[0], cpu[0])) << shape_str(s) << " P=" << P;  // no reduction in dx
      EXPECT_LT(max_rel_diff(gpu[1], cpu[1]), 1e-6) << shape_str(s) << " P=" << P;
      EXPECT_LT(max_rel_diff(gpu[2], cpu[2]), 1e-6) << shape_str(s) << " P=" << P;
    }
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
  for (const Shape& s : std::vector<Shape>{{2, 4, 3, 5}, {5, 3, 16, 17}, {1, 2, 1, 1}, {2, 1, 128, 130}}) {
    const Tensor dy = randf(s, seed++);
    auto cpu = run("conv2d_grad_bias", {&dy});
    const Dims d = dims_of(s);
    for (int64_t P : parts_for(d)) {
      Tensor db(DType::f32, {d.c});
      for (int64_t k = 0; k < d.c; ++k)
        db.as<float>()[k] = static_cast<float>(split_sum(d.n * d.l, P, [&](bn::Range r, int t) {
          return bn::partial_sum(dy.as<float>(), d.n, d.c, d.l, k, r, t, kThreads);
        }));
      EXPECT_LT(max_rel_diff(db, cpu[0]), 1e-6) << shape_str(s) << " P=" << P;
    }
  }
}

}  // namespace
}  // namespace mnemo::test
