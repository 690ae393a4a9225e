// batch_norm (training and inference), batch_norm_grad, batch_norm_inference_grad and
// batch_norm_stats against naive float64 loops; the inference-mode gradient against central
// differences; PyTorch's running-statistics formula; shape and input-count errors.
#include <cmath>
#include <cstring>

#include "autograd/gradient.h"
#include "test_util.h"

namespace mnemo::test {
namespace {

Tensor positive64(Shape s, uint64_t seed) {  // variances
  Tensor t = rand64(std::move(s), seed);
  for (int64_t i = 0; i < t.numel(); ++i) set(t, i, 0.3 + std::abs(get(t, i)));
  return t;
}

// x viewed as [N, C, L].
struct Dims {
  int64_t n, c, l;
  int64_t at(int64_t in, int64_t ic, int64_t i) const { return (in * c + ic) * l + i; }
};
Dims dims_of(const Shape& s) {
  int64_t l = 1;
  for (size_t i = 2; i < s.size(); ++i) l *= s[i];
  return {s[0], s[1], l};
}

struct NaiveStats {
  std::vector<double> mean, var;
};
NaiveStats naive_stats(const Tensor& x) {
  const Dims d = dims_of(x.shape());
  NaiveStats st{std::vector<double>(d.c, 0.0), std::vector<double>(d.c, 0.0)};
  const double m = static_cast<double>(d.n * d.l);
  for (int64_t c = 0; c < d.c; ++c) {
    for (int64_t n = 0; n < d.n; ++n)
      for (int64_t i = 0; i < d.l; ++i) st.mean[c] += get(x, d.at(n, c, i));
    st.mean[c] /= m;
    for (int64_t n = 0; n < d.n; ++n)
      for (int64_t i = 0; i < d.l; ++i) st.var[c] += std::pow(get(x, d.at(n, c, i)) - st.mean[c], 2);
    st.var[c] /= m;
  }
  return st;
}

Tensor vec(const std::vector<double>& v) {
  Tensor t(DType::f64, {static_cast<int64_t>(v.size())});
  for (size_t i = 0; i < v.size(); ++i) set(t, static_cast<int64_t>(i), v[i]);
  return t;
}

// y = gamma * (x - mean) * inv_std + beta.
Tensor naive_normalise(const Tensor& x, const Tensor& gamma, const Tensor& beta, const std::vector<double>& mean,
                       const std::vector<double>& inv_std) {
  const Dims d = dims_of(x.shape());
  Tensor y(DType::f64, x.shape());
  for (int64_t n = 0; n < d.n; ++n)
    for (int64_t c = 0; c < d.c; ++c)
      for (int64_t i = 0; i < d.l; ++i) {
        const int64_t k = d.at(n, c, i);
        set(y, k, get(gamma, c) * (get(x, k) - mean[c]) * inv_std[c] + get(beta, c));
      }
  return y;
}

const Shape kShapes[] = {{3, 3}, {2, 3, 5, 6}, {3, 3, 7, 5}, {4, 5, 9, 9}, {2, 3, 6}};

TEST(BatchNorm, TrainingForwardMatchesNaive) {
  for (const Shape& s : kShapes) {
    const double eps = 1e-3;
    Tensor x = rand64(s, 1, 2.0, 0.5), gamma = rand64({s[1]}, 2), beta = rand64({s[1]}, 3);
    auto out = run("batch_norm", {&x, &gamma, &beta}, {{"eps", eps}});
    ASSERT_EQ(out.size(), 3u);
    const NaiveStats st = naive_stats(x);
    std::vector<double> inv_std(st.var.size());
    for (size_t c = 0; c < inv_std.size(); ++c) inv_std[c] = 1.0 / std::sqrt(st.var[c] + eps);
    EXPECT_LE(max_rel_diff(out[0], naive_normalise(x, gamma, beta, st.mean, inv_std)), 1e-12) << shape_str(s);
    EXPECT_LE(max_rel_diff(out[1], vec(st.mean)), 1e-12) << shape_str(s);
    EXPECT_LE(max_rel_diff(out[2], vec(inv_std)), 1e-12) << shape_str(s);
    // Deterministic: a second run gives the same bits.
    auto again = run("batch_norm", {&x, &gamma, &beta}, {{"eps", eps}});
    for (size_t j = 0; j < out.size(); ++j) EXPECT_TRUE(bitwise_equal(out[j], again[j]));
  }
}

TEST(BatchNorm, BitwiseIdenticalForAnyThreadCount) {
  const Shape s{4, 6, 9, 11};
  Tensor x = cast(rand64(s, 40), DType::f32), dy = cast(rand64(s, 41), DType::f32);
  Tensor gamma = cast(rand64({6}, 42), DType::f32), beta = cast(rand64({6}, 43), DType::f32);
  auto both = [&] {
    auto f = run("batch_norm", {&x, &gamma, &beta});
    auto b = run("batch_norm_grad", {&x, &gamma, &f[1], &f[2], &dy});
    for (Tensor& t : b) f.push_back(std::move(t));
    return f;
  };
  expect_bitwise_for_any_thread_count(both);
}

TEST(BatchNorm, Float32StatisticsAreAccurateWithALargeMean) {
  // Statistics accumulate in double: a float32 channel with mean 1000 and std 1 keeps its variance.
  const Shape s{8, 3, 16, 16};
  Tensor x = rand64(s, 4, 1.0, 1000.0), gamma = rand64({3}, 5), beta = rand64({3}, 6);
  Tensor x32 = cast(x, DType::f32);
  const Tensor x64 = cast(x32, DType::f64), gamma32 = cast(gamma, DType::f32), beta32 = cast(beta, DType::f32);
  auto out = run("batch_norm", {&x64, &gamma, &beta});
  auto out32 = run("batch_norm", {&x32, &gamma32, &beta32});
  EXPECT_LE(max_rel_diff(cast(out32[2], DType::f64), out[2]), 1e-6);
  EXPECT_LE(max_rel_diff(cast(out32[0], DType::f64), out[0]), 1e-3);
}

TEST(BatchNorm, InferenceForwardMatchesNaive) {
  for (const Shape& s : kShapes) {
    const int64_t c = s[1];
    Tensor x = rand64(s, 7), gamma = rand64({c}, 8), beta = rand64({c}, 9), rm = rand64({c}, 10),
           rv = positive64({c}, 11);
    auto out = run("batch_norm", {&x, &gamma, &beta, &rm, &rv}, {{"training", false}});
    ASSERT_EQ(out.size(), 1u);
    std::vector<double> mean(c), inv_std(c);
    for (int64_t k = 0; k < c; ++k) mean[k] = get(rm, k), inv_std[k] = 1.0 / std::sqrt(get(rv, k) + 1e-5);
    EXPECT_LE(max_rel_diff(out[0], naive_normalise(x, gamma, beta, mean, inv_std)), 1e-12) << shape_str(s);
  }
}

// dx, dgamma, dbeta of y = gamma * (x - mean) * inv_std + beta, given mean and inv_std; `batch`
// adds the terms through the batch statistics (training mode).
std::vector<Tensor> naive_backward(const Tensor& x, const Tensor& gamma, const std::vector<double>& mean,
                                   const std::vector<double>& inv_std, const Tensor& dy, bool batch) {
  const Dims d = dims_of(x.shape());
  const double m = static_cast<double>(d.n * d.l);
  Tensor dx(DType::f64, x.shape()), dgamma(DType::f64, {d.c}), dbeta(DType::f64, {d.c});
  for (int64_t c = 0; c < d.c; ++c) {
    double sdy = 0, sdyxhat = 0;
    for (int64_t n = 0; n < d.n; ++n)
      for (int64_t i = 0; i < d.l; ++i) {
        const int64_t k = d.at(n, c, i);
        sdy += get(dy, k);
        sdyxhat += get(dy, k) * (get(x, k) - mean[c]) * inv_std[c];
      }
    set(dbeta, c, sdy);
    set(dgamma, c, sdyxhat);
    for (int64_t n = 0; n < d.n; ++n)
      for (int64_t i = 0; i < d.l; ++i) {
        const int64_t k = d.at(n, c, i);
        const double xhat = (get(x, k) - mean[c]) * inv_std[c];
        const double g = batch ? get(dy, k) - sdy / m - xhat * sdyxhat / m : get(dy, k);
        set(dx, k, get(gamma, c) * inv_std[c] * g);
      }
  }
  std::vector<Tensor> out;
  out.push_back(std::move(dx));
  out.push_back(std::move(dgamma));
  out.push_back(std::move(dbeta));
  return out;
}

TEST(BatchNorm, GradMatchesNaive) {
  for (const Shape& s : kShapes) {
    Tensor x = rand64(s, 12, 1.5, -0.3), gamma = rand64({s[1]}, 13), beta = rand64({s[1]}, 14),
           dy = rand64(s, 15);
    auto fwd = run("batch_norm", {&x, &gamma, &beta});
    auto got = run("batch_norm_grad", {&x, &gamma, &fwd[1], &fwd[2], &dy});
    ASSERT_EQ(got.size(), 3u);
    std::vector<double> mean(s[1]), inv_std(s[1]);
    for (int64_t c = 0; c < s[1]; ++c) mean[c] = get(fwd[1], c), inv_std[c] = get(fwd[2], c);
    auto ref = naive_backward(x, gamma, mean, inv_std, dy, true);
    for (size_t j = 0; j < 3; ++j) EXPECT_LE(max_rel_diff(got[j], ref[j]), 1e-12) << shape_str(s) << " output " << j;
  }
}

TEST(BatchNorm, InferenceGradMatchesNaive) {
  for (const Shape& s : kShapes) {
    const int64_t c = s[1];
    const double eps = 1e-2;
    Tensor x = rand64(s, 16), gamma = rand64({c}, 17), rm = rand64({c}, 18), rv = positive64({c}, 19),
           dy = rand64(s, 20);
    auto got = run("batch_norm_inference_grad", {&x, &gamma, &rm, &rv, &dy}, {{"eps", eps}});
    ASSERT_EQ(got.size(), 3u);
    std::vector<double> mean(c), inv_std(c);
    for (int64_t k = 0; k < c; ++k) mean[k] = get(rm, k), inv_std[k] = 1.0 / std::sqrt(get(rv, k) + eps);
    auto ref = naive_backward(x, gamma, mean, inv_std, dy, false);
    for (size_t j = 0; j < 3; ++j) EXPECT_LE(max_rel_diff(got[j], ref[j]), 1e-12) << shape_str(s) << " output " << j;
  }
}

// Inference mode through autograd: dx, dgamma, dbeta against central differences of
// J = <y, r>; the running statistics get no gradient (zeros).
TEST(BatchNorm, InferenceModeGradientMatchesCentralDifferences) {
  const Shape s{2, 3, 5, 6};
  Graph g;
  std::vector<Tensor> v;
  for (int i = 0; i < 4; ++i) v.push_back(rand64(i == 0 ? s : Shape{3}, 21 + i));
  v.push_back(positive64({3}, 25));
  const char* names[] = {"x", "gamma", "beta", "rm", "rv"};
  std::vector<EntryRef> in;
  for (int i = 0; i < 5; ++i) in.push_back(g.param(names[i], v[i].type(), i < 3));
  const EntryRef y = g.add1("batch_norm", in, {{"training", false}, {"eps", 1e-3}});
  Tensor r = rand64(s, 26);
  const EntryRef re = g.input("r", r.type());
  std::vector<int> wrt;
  for (int i = 0; i < 5; ++i) wrt.push_back(in[i].node);
  TrainingGraph tg = build_gradient_graph(g, {{y, re}}, wrt, {});
  std::vector<std::pair<std::string, const Tensor*>> bind{{"r", &r}};
  for (int i = 0; i < 5; ++i) bind.push_back({names[i], &v[i]});
  std::vector<EntryRef> grads;
  for (const ParamGrad& pg : tg.grads) grads.push_back(pg.grad);
  auto analytic = run_graph(tg.graph, bind, grads);
  auto objective = [&] {
    Tensor yv = std::move(run_graph(g, bind, {y})[0]);
    double j = 0;
    for (int64_t i = 0; i < yv.numel(); ++i) j += get(yv, i) * get(r, i);
    return j;
  };
  const double h = 1e-6;
  for (int w = 0; w < 3; ++w)
    for (int64_t i = 0; i < v[w].numel(); i += 7) {
      const double x0 = get(v[w], i);
      set(v[w], i, x0 + h);
      const double jp = objective();
      set(v[w], i, x0 - h);
      const double jm = objective();
      set(v[w], i, x0);
      const double num = (jp - jm) / (2 * h), ana = get(analytic[w], i);
      EXPECT_NEAR(ana, num, 1e-6 * std::max(1.0, std::abs(num))) << names[w] << "[" << i << "]";
    }
  for (int w = 3; w < 5; ++w)
    for (int64_t i = 0; i < 3; ++i) EXPECT_EQ(get(analytic[w], i), 0.0) << names[w];
}

TEST(BatchNorm, StatsFollowPyTorch) {
  for (const Shape& s : {Shape{4, 3}, Shape{3, 3, 5, 7}}) {
    const int64_t c = s[1];
    const double momentum = 0.25, eps = 1e-4;
    Tensor x = rand64(s, 27, 2.0, 1.0), gamma = rand64({c}, 28), beta = rand64({c}, 29);
    Tensor rm = rand64({c}, 30), rv = positive64({c}, 31);
    auto fwd = run("batch_norm", {&x, &gamma, &beta}, {{"eps", eps}});
    const Dims d = dims_of(s);
    const int64_t count = d.n * d.l;
    auto got = run("batch_norm_stats", {&rm, &rv, &fwd[1], &fwd[2]},
                      {{"momentum", momentum}, {"eps", eps}, {"count", count}});
    ASSERT_EQ(got.size(), 2u);
    // torch: running_mean = (1 - m) * running_mean + m * mean;
    //        running_var  = (1 - m) * running_var + m * var_unbiased (sum (x - mean)^2 / (count - 1)).
    const NaiveStats st = naive_stats(x);
    std::vector<double> want_mean(c), want_var(c);
    for (int64_t k = 0; k < c; ++k) {
      const double unbiased = st.var[k] * static_cast<double>(count) / static_cast<double>(count - 1);
      want_mean[k] = (1 - momentum) * get(rm, k) + momentum * st.mean[k];
      want_var[k] = (1 - momentum) * get(rv, k) + momentum * unbiased;
    }
    EXPECT_LE(max_rel_diff(got[0], vec(want_mean)), 1e-12) << shape_str(s);
    EXPECT_LE(max_rel_diff(got[1], vec(want_var)), 1e-12) << shape_str(s);
  }
  // Default momentum 0.1.
  Tensor one = vec({1.0}), zero = vec({0.0}), mean = vec({2.0}), inv_std = vec({1.0 / std::sqrt(4.0 + 1e-5)});
  auto got = run("batch_norm_stats", {&zero, &one, &mean, &inv_std}, {{"count", int64_t{5}}});
  EXPECT_NEAR(get(got[0], 0), 0.2, 1e-15);
  EXPECT_NEAR(get(got[1], 0), 0.9 + 0.1 * 4.0 * 5.0 / 4.0, 1e-12);
}

TEST(BatchNorm, StatsOfAConstantChannelKeepANonNegativeVariance) {
  // float32: inv_std = 1/sqrt(eps) rounded; the recovered variance must not go below 0.
  Tensor x(DType::f32, {4, 2, 3, 3}), c1(DType::f32, {2}), c0(DType::f32, {2});
  for (int64_t i = 0; i < x.numel(); ++i) set(x, i, (i / 9) % 2 ? 0.1 : -3.0);  // channel 0: -3, 1: 0.1
  for (int64_t i = 0; i < 2; ++i) set(c1, i, 1.0), set(c0, i, 0.0);
  auto fwd = run("batch_norm", {&x, &c1, &c0});
  auto got = run("batch_norm_stats", {&c0, &c0, &fwd[1], &fwd[2]}, {{"count", int64_t{36}}});
  for (int64_t i = 0; i < 2; ++i) {
    EXPECT_GE(get(got[1], i), 0.0);
    EXPECT_LE(get(got[1], i), 1e-9);
  }
}

// No channels: nothing to normalise, and nothing divides by the channel count.
TEST(BatchNorm, ZeroChannelsRunAndGiveEmptyResults) {
  Tensor x(DType::f64, {2, 0, 3, 3}), dy(DType::f64, {2, 0, 3, 3}), v(DType::f64, {0});
  auto f = run("batch_norm", {&x, &v, &v});
  auto g = run("batch_norm_grad", {&x, &v, &v, &v, &dy});
  ASSERT_EQ(g.size(), 3u);
  EXPECT_EQ(g[0].shape(), (Shape{2, 0, 3, 3}));
  EXPECT_EQ(g[1].numel() + g[2].numel() + f[1].numel(), 0);
}

TEST(BatchNorm, ErrorsAreClear) {
  Graph g;
  const EntryRef x = g.input("x", {DType::f32, {2, 3, 5, 5}});
  const EntryRef c3 = g.input("c3", {DType::f32, {3}});
  const EntryRef c4 = g.input("c4", {DType::f32, {4}});
  EXPECT_NE(error_of([&] { g.add("batch_norm", {x, c4, c3}); }).find("gamma must be float32[3]"), std::string::npos)
      << error_of([&] { g.add("batch_norm", {x, c4, c3}); });
  EXPECT_NE(error_of([&] { g.add("batch_norm", {x, c3, c3, c3, c3}); }).find("training=true takes 3 inputs"),
            std::string::npos);
  EXPECT_NE(error_of([&] { g.add("batch_norm", {x, c3, c3}, {{"training", false}}); })
                .find("training=false takes 5 inputs (x, gamma, beta, running_mean, running_var), got 3"),
            std::string::npos);
  EXPECT_NE(error_of([&] { g.add("batch_norm", {x, c3, c3, c3, c4}, {{"training", false}}); })
                .find("running_var must be float32[3]"),
            std::string::npos);
  const EntryRef x1 = g.input("x1", {DType::f32, {6}});
  EXPECT_NE(error_of([&] { g.add("batch_norm", {x1, c3, c3}); }).find("x must be [N,C] or [N,C,H,W]"),
            std::string::npos);
  // One value per channel in training: y would be beta and the gradients zero (PyTorch refuses it).
  const EntryRef x1113 = g.input("x1113", {DType::f32, {1, 3, 1, 1}});
  EXPECT_NE(error_of([&] { g.add("batch_norm", {x1113, c3, c3}); }).find("needs more than one value per channel"), std::string::npos)
      << error_of([&] { g.add("batch_norm", {x1113, c3, c3}); });
  const EntryRef x64 = g.input("x64", {DType::f64, {2, 3}});
  EXPECT_NE(error_of([&] { g.add("batch_norm", {x64, c3, c3}); }).find("gamma must be float64[3]"), std::string::npos);
  EXPECT_NE(error_of([&] { g.add("batch_norm_stats", {c3, c3, c3, c3}); }).find("missing attribute 'count'"),
            std::string::npos);
  EXPECT_NE(error_of([&] { g.add("batch_norm_stats", {c3, c3, c3, c3}, {{"count", int64_t{1}}}); })
                .find("at least 2"),
            std::string::npos);
  EXPECT_NE(error_of([&] { g.add("batch_norm_stats", {c3, c3, c4, c3}, {{"count", int64_t{9}}}); })
                .find("mean must be float32[3]"),
            std::string::npos);
  const EntryRef dy = g.input("dy", {DType::f32, {2, 3, 5, 4}});
  EXPECT_NE(error_of([&] { g.add("batch_norm_grad", {x, c3, c3, c3, dy}); }).find("dy must have x's type"),
            std::string::npos);
  // batch_norm_recompute: a training batch norm's, with its statistics [C]
  EXPECT_NE(error_of([&] { g.add("batch_norm_recompute", {x, c3, c3, c3, c3}, {{"training", false}}); })
                .find("batch_norm_recompute recomputes a training batch_norm: training must be true"),
            std::string::npos);
  EXPECT_NE(error_of([&] { g.add("batch_norm_recompute", {x, c3, c3, c3, c4}); }).find("inv_std must be float32[3]"),
            std::string::npos);
  EXPECT_NE(error_of([&] { g.add("batch_norm_recompute", {x, c3, c3, c3}); }).find("takes 5 inputs"), std::string::npos)
      << error_of([&] { g.add("batch_norm_recompute", {x, c3, c3, c3}); });
}

}  // namespace
}  // namespace mnemo::test
