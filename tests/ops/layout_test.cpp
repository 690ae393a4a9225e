// Channel-blocked activations (ops/layout.cpp): to_blocked / to_plain move every element to its
// place and back; conv2d and its backward ops with `block` give bitwise the results of the plain
// ops (oneDNN runs the same kernel, only the reorders around it go); batch_norm and its backward
// ops with `block` match the plain ones within rounding (float64: 1e-12), are bitwise the same
// for any thread count, and their gradient matches central differences; clear errors.
#include "autograd/gradient.h"
#include "test_util.h"

namespace mnemo::test {
namespace {

Tensor blocked(const Tensor& x, int64_t b) { return std::move(run("to_blocked", {&x}, {{"block", b}})[0]); }
Tensor plain(const Tensor& x) { return std::move(run("to_plain", {&x})[0]); }

TEST(Layout, ToBlockedPlacesEveryChannelInItsLane) {
  for (int64_t b : {8, 16}) {
    const Shape s{3, 2 * b, 5, 7};
    Tensor x = rand64(s, 1);
    Tensor y = blocked(x, b);
    ASSERT_EQ(y.shape(), (Shape{3, 2, 5, 7, b}));
    for (int64_t n = 0; n < 3; ++n)
      for (int64_t c = 0; c < 2 * b; ++c)
        for (int64_t i = 0; i < 35; ++i)
          ASSERT_EQ(get(y, ((n * 2 + c / b) * 35 + i) * b + c % b), get(x, (n * 2 * b + c) * 35 + i)) << n << " " << c;
    EXPECT_TRUE(bitwise_equal(plain(y), x));
    // float32 too (and a shape above the parallel grain)
    Tensor big = cast(rand64({4, 2 * b, 32, 33}, 2), DType::f32);
    EXPECT_TRUE(bitwise_equal(plain(blocked(big, b)), big));
  }
}

TEST(Layout, AnyRankFromThree) {
  for (const Shape& s : {Shape{2, 16, 5}, Shape{2, 8, 3, 4, 5}}) {
    Tensor x = rand64(s, 40);
    Tensor y = blocked(x, 8);
    Shape want = s;
    want[1] /= 8;
    want.push_back(8);
    EXPECT_EQ(y.shape(), want);
    EXPECT_TRUE(bitwise_equal(plain(y), x)) << shape_str(s);
  }
  // batch norm on a rank-4 blocked tensor (from [N,C,L]) is the plain op on [N,C,L]
  Tensor x = rand64({3, 16, 7}, 41), gamma = rand64({16}, 42), beta = rand64({16}, 43);
  Tensor xb = blocked(x, 8);
  auto f = run("batch_norm", {&x, &gamma, &beta});
  auto fb = run("batch_norm", {&xb, &gamma, &beta}, {{"block", int64_t{8}}});
  EXPECT_LE(max_rel_diff(plain(fb[0]), f[0]), 1e-12);
}

TEST(Layout, ErrorsNameTheShape) {
  Tensor x = rand64({2, 12, 3, 3}, 3);
  EXPECT_NE(error_of([&] { blocked(x, 8); }).find("not a multiple of the block 8"), std::string::npos);
  EXPECT_NE(error_of([&] { blocked(x, 4); }).find("block must be 8 or 16"), std::string::npos);
  EXPECT_NE(error_of([&] { plain(x); }).find("channel-blocked"), std::string::npos);
}

struct ConvCase {
  int64_t N, C, H, W, K, R, stride, pad;
};

// The plain op, and the blocked op on blocked operands (weights stay plain), give the same bits.
TEST(Layout, BlockedConvolutionsAreBitwiseThePlainOnes) {
  // The last two: weights of 4 MiB and more over small activations, run in parts (ops/conv2d.cpp
  // weight_parts), whose slices of blocked activations are whole blocks.
  const ConvCase cases[] = {{2, 16, 8, 8, 16, 3, 1, 1},    {3, 16, 9, 10, 32, 3, 2, 1},    {2, 32, 7, 7, 16, 1, 1, 0},
                            {2, 16, 9, 9, 32, 1, 2, 0},    {1, 384, 5, 5, 384, 3, 1, 1}, {2, 1024, 4, 4, 1024, 1, 2, 0}};
  for (int64_t b : {8, 16})
    for (const ConvCase& k : cases) {
      const int64_t P = (k.H + 2 * k.pad - k.R) / k.stride + 1, Q = (k.W + 2 * k.pad - k.R) / k.stride + 1;
      Tensor x = cast(rand64({k.N, k.C, k.H, k.W}, 4), DType::f32), w = cast(rand64({k.K, k.C, k.R, k.R}, 5), DType::f32);
      Tensor dy = cast(rand64({k.N, k.K, P, Q}, 6), DType::f32);
      Attrs a{{"stride", k.stride}, {"padding", k.pad}}, ab = a;
      ab["block"] = b;
      const std::string what = "C" + std::to_string(k.C) + " K" + std::to_string(k.K) + " block " + std::to_string(b);
      Tensor y = std::move(run("conv2d", {&x, &w}, a)[0]);
      Tensor xb = blocked(x, b), dyb = blocked(dy, b);
      Tensor yb = std::move(run("conv2d", {&xb, &w}, ab)[0]);
      EXPECT_TRUE(bitwise_equal(plain(yb), y)) << "forward, " << what;
      Attrs ad = a, adb = ab;
      ad["input_hw"] = adb["input_hw"] = std::vector<int64_t>{k.H, k.W};
      Tensor dx = std::move(run("conv2d_grad_data", {&dy, &w}, ad)[0]);
      Tensor dxb = std::move(run("conv2d_grad_data", {&dyb, &w}, adb)[0]);
      EXPECT_TRUE(bitwise_equal(plain(dxb), dx)) << "data, " << what;
      Attrs aw = a, awb = ab;
      aw["kernel"] = awb["kernel"] = std::vector<int64_t>{k.R, k.R};
      Tensor dw = std::move(run("conv2d_grad_weight", {&dy, &x}, aw)[0]);
      Tensor dwb = std::move(run("conv2d_grad_weight", {&dyb, &xb}, awb)[0]);
      EXPECT_TRUE(bitwise_equal(dwb, dw)) << "weight, " << what;
    }
}

TEST(Layout, BlockedConvolutionErrors) {
  Tensor x = cast(rand64({2, 16, 5, 5}, 7), DType::f32), w = cast(rand64({16, 16, 3, 3}, 8), DType::f32);
  Tensor xb = blocked(x, 8), bias = cast(rand64({16}, 9), DType::f32);
  Tensor x64 = blocked(rand64({2, 16, 5, 5}, 7), 8), w64 = rand64({16, 16, 3, 3}, 8);
  EXPECT_NE(error_of([&] { run("conv2d", {&x, &w}, {{"block", int64_t{8}}}); }).find("channel-blocked float32"), std::string::npos);
  EXPECT_NE(error_of([&] { run("conv2d", {&x64, &w64}, {{"block", int64_t{8}}}); }).find("channel-blocked float32"),
            std::string::npos);
  EXPECT_NE(error_of([&] { run("conv2d", {&xb, &w, &bias}, {{"block", int64_t{8}}}); }).find("a bias with block"),
            std::string::npos);
  EXPECT_NE(error_of([&] { run("conv2d", {&xb, &w}, {{"block", int64_t{8}}, {"algo", std::string("im2col")}}); })
                .find("runs oneDNN's kernels"),
            std::string::npos);
  Tensor w12 = cast(rand64({12, 16, 3, 3}, 10), DType::f32);
  EXPECT_NE(error_of([&] { run("conv2d", {&xb, &w12}, {{"block", int64_t{8}}}); }).find("must be a multiple of it"),
            std::string::npos);
  Tensor dyb = blocked(cast(rand64({2, 16, 5, 5}, 11), DType::f32), 8), w_c12 = cast(rand64({16, 12, 3, 3}, 12), DType::f32);
  EXPECT_NE(error_of([&] {
              run("conv2d_grad_data", {&dyb, &w_c12}, {{"block", int64_t{8}}, {"padding", int64_t{1}}, {"input_hw", std::vector<int64_t>{5, 5}}});
            }).find("the input channels C=12 must be a multiple of it"),
            std::string::npos);
}

Tensor positive(Shape s, uint64_t seed) {
  Tensor t = rand64(std::move(s), seed);
  for (int64_t i = 0; i < t.numel(); ++i) set(t, i, 0.3 + std::abs(get(t, i)));
  return t;
}

// Each batch-norm op with block b against the plain op on the same values (float64).
TEST(Layout, BlockedBatchNormMatchesThePlainOne) {
  for (int64_t b : {8, 16})
    for (const Shape& s : {Shape{3, 2 * b, 5, 7}, Shape{2, b, 1, 1}, Shape{4, 3 * b, 6, 6}}) {
      const int64_t C = s[1];
      Tensor x = rand64(s, 11, 2.0, 0.5), dy = rand64(s, 12), gamma = rand64({C}, 13), beta = rand64({C}, 14);
      Tensor rm = rand64({C}, 15), rv = positive({C}, 16);
      Tensor xb = blocked(x, b), dyb = blocked(dy, b);
      const Attrs ab{{"block", b}};
      const std::string what = shape_str(s) + " block " + std::to_string(b);
      auto f = run("batch_norm", {&x, &gamma, &beta}, {{"eps", 1e-3}});
      auto fb = run("batch_norm", {&xb, &gamma, &beta}, {{"eps", 1e-3}, {"block", b}});
      EXPECT_LE(max_rel_diff(plain(fb[0]), f[0]), 1e-12) << "y, " << what;
      EXPECT_LE(max_rel_diff(fb[1], f[1]), 1e-12) << "mean, " << what;
      EXPECT_LE(max_rel_diff(fb[2], f[2]), 1e-12) << "inv_std, " << what;
      auto g = run("batch_norm_grad", {&x, &gamma, &f[1], &f[2], &dy});
      auto gb = run("batch_norm_grad", {&xb, &gamma, &f[1], &f[2], &dyb}, ab);
      EXPECT_LE(max_rel_diff(plain(gb[0]), g[0]), 1e-12) << "dx, " << what;
      EXPECT_LE(max_rel_diff(gb[1], g[1]), 1e-12) << "dgamma, " << what;
      EXPECT_LE(max_rel_diff(gb[2], g[2]), 1e-12) << "dbeta, " << what;
      auto i = run("batch_norm", {&x, &gamma, &beta, &rm, &rv}, {{"training", false}});
      auto ib = run("batch_norm", {&xb, &gamma, &beta, &rm, &rv}, {{"training", false}, {"block", b}});
      EXPECT_LE(max_rel_diff(plain(ib[0]), i[0]), 1e-12) << "inference y, " << what;
      auto ig = run("batch_norm_inference_grad", {&x, &gamma, &rm, &rv, &dy});
      auto igb = run("batch_norm_inference_grad", {&xb, &gamma, &rm, &rv, &dyb}, ab);
      EXPECT_LE(max_rel_diff(plain(igb[0]), ig[0]), 1e-12) << "inference dx, " << what;
      for (int j = 1; j < 3; ++j) EXPECT_LE(max_rel_diff(igb[j], ig[j]), 1e-12) << "inference output " << j << ", " << what;
    }
}

// float32 (what training runs): within float32 rounding of the plain op.
TEST(Layout, BlockedBatchNormFloat32MatchesThePlainOne) {
  const Shape s{8, 32, 9, 9};
  Tensor x = cast(rand64(s, 50, 2.0, 0.5), DType::f32), dy = cast(rand64(s, 51), DType::f32);
  Tensor gamma = cast(rand64({32}, 52), DType::f32), beta = cast(rand64({32}, 53), DType::f32);
  for (int64_t b : {8, 16}) {
    Tensor xb = blocked(x, b), dyb = blocked(dy, b);
    auto f = run("batch_norm", {&x, &gamma, &beta});
    auto fb = run("batch_norm", {&xb, &gamma, &beta}, {{"block", b}});
    auto g = run("batch_norm_grad", {&x, &gamma, &f[1], &f[2], &dy});
    auto gb = run("batch_norm_grad", {&xb, &gamma, &f[1], &f[2], &dyb}, {{"block", b}});
    const double d[] = {norm_rel_diff(plain(fb[0]), f[0]), norm_rel_diff(fb[1], f[1]), norm_rel_diff(fb[2], f[2]),
                        norm_rel_diff(plain(gb[0]), g[0]), norm_rel_diff(gb[1], g[1]), norm_rel_diff(gb[2], g[2])};
    for (int j = 0; j < 6; ++j) EXPECT_TRUE(d[j] <= 1e-6) << "output " << j << " block " << b << ": " << d[j];  // (NaN fails)
  }
}

TEST(Layout, BlockedBatchNormIsBitwiseTheSameForAnyThreadCount) {
  const Shape s{6, 2, 9, 11, 8};
  Tensor x = cast(rand64(s, 20), DType::f32), dy = cast(rand64(s, 21), DType::f32);
  Tensor gamma = cast(rand64({16}, 22), DType::f32), beta = cast(rand64({16}, 23), DType::f32);
  const Attrs ab{{"block", int64_t{8}}};
  auto both = [&] {
    auto f = run("batch_norm", {&x, &gamma, &beta}, ab);
    auto g = run("batch_norm_grad", {&x, &gamma, &f[1], &f[2], &dy}, ab);
    for (Tensor& t : g) f.push_back(std::move(t));
    return f;
  };
  expect_bitwise_for_any_thread_count(both);
}

// x -> to_blocked -> batch_norm (training, block 8) -> to_plain, J = <y, r>: dx, dgamma, dbeta
// through the gradient pass against central differences (float64).
TEST(Layout, BlockedBatchNormGradientMatchesCentralDifferences) {
  const Shape s{3, 16, 3, 4};
  Graph g;
  std::vector<Tensor> v;
  v.push_back(rand64(s, 30, 1.5, 0.2));
  v.push_back(rand64({16}, 31));
  v.push_back(rand64({16}, 32));
  const char* names[] = {"x", "gamma", "beta"};
  std::vector<EntryRef> in;
  for (int i = 0; i < 3; ++i) in.push_back(g.param(names[i], v[i].type(), true));
  const EntryRef xb = g.add1("to_blocked", {in[0]}, {{"block", int64_t{8}}});
  const int bn = g.add("batch_norm", {xb, in[1], in[2]}, {{"eps", 1e-3}, {"block", int64_t{8}}});
  const EntryRef y = g.add1("to_plain", {EntryRef{bn, 0}});
  Tensor r = rand64(s, 33);
  const EntryRef re = g.input("r", r.type());
  TrainingGraph tg = build_gradient_graph(g, {{y, re}}, {in[0].node, in[1].node, in[2].node}, {});
  std::vector<std::pair<std::string, const Tensor*>> bind{{"r", &r}};
  for (int i = 0; i < 3; ++i) bind.push_back({names[i], &v[i]});
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
  int checked = 0;
  for (int w = 0; w < 3; ++w)
    for (int64_t i = 0; i < v[w].numel(); i += w == 0 ? 5 : 1) {
      const double x0 = get(v[w], i);
      set(v[w], i, x0 + h);
      const double jp = objective();
      set(v[w], i, x0 - h);
      const double jm = objective();
      set(v[w], i, x0);
      const double num = (jp - jm) / (2 * h), ana = get(analytic[w], i);
      ASSERT_TRUE(std::isfinite(ana) && std::isfinite(num)) << names[w] << "[" << i << "]";
      EXPECT_NEAR(ana, num, 1e-6 * std::max(1.0, std::abs(num))) << names[w] << "[" << i << "]";
      ++checked;
    }
  EXPECT_GT(checked, 100);
}

}  // namespace
}  // namespace mnemo::test
