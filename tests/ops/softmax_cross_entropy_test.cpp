// softmax_cross_entropy and its backward op against naive float64 loops; stability for logits
// around 1000; a central-difference check of the loss gradient (the registry's generic check
// weights a scalar output by 0, so it cannot see this op's gradient); label and shape errors.
#include <cstring>
#include <cmath>

#include "autograd/gradient.h"
#include "test_util.h"

namespace mnemo::test {
namespace {

Tensor logits64(int64_t n, int64_t c, uint64_t seed, double scale = 2.0, double shift = 0.0) {
  Tensor t(DType::f64, {n, c});
  fill_normal(t, seed, scale);
  for (int64_t i = 0; i < t.numel(); ++i) set(t, i, get(t, i) + shift);
  return t;
}
Tensor labels_of(int64_t n, int64_t c, uint64_t seed) {
  Tensor t(DType::i32, {n});
  fill_ints(t, seed, c);
  return t;
}
Tensor scalar(double v) {
  Tensor t(DType::f64, {});
  set(t, 0, v);
  return t;
}

// Textbook formula: loss = -1/N sum_n log(exp(z[n,l]) / sum_c exp(z[n,c])).
double ref_loss(const Tensor& z, const Tensor& labels) {
  const int64_t N = z.shape()[0], C = z.shape()[1];
  double total = 0;
  for (int64_t n = 0; n < N; ++n) {
    double s = 0;
    for (int64_t c = 0; c < C; ++c) s += std::exp(get(z, n * C + c));
    total += -std::log(std::exp(get(z, n * C + static_cast<int64_t>(get(labels, n)))) / s);
  }
  return total / static_cast<double>(N);
}

// dz[n,c] = (exp(z[n,c]) / sum exp(z[n,:]) - [c == l]) * dloss / N
Tensor ref_grad(const Tensor& z, const Tensor& labels, double dloss) {
  const int64_t N = z.shape()[0], C = z.shape()[1];
  Tensor dz(DType::f64, z.shape());
  for (int64_t n = 0; n < N; ++n) {
    double s = 0;
    for (int64_t c = 0; c < C; ++c) s += std::exp(get(z, n * C + c));
    for (int64_t c = 0; c < C; ++c) {
      const double p = std::exp(get(z, n * C + c)) / s;
      set(dz, n * C + c, (p - (c == get(labels, n) ? 1.0 : 0.0)) * dloss / static_cast<double>(N));
    }
  }
  return dz;
}

struct Size {
  int64_t n, c;
};
const Size kSizes[] = {{3, 5}, {1, 1}, {7, 2}, {512, 100}};  // the last one is multithreaded

TEST(SoftmaxCrossEntropy, LossMatchesNaive) {
  for (const Size& s : kSizes) {
    Tensor z = logits64(s.n, s.c, 1), l = labels_of(s.n, s.c, 2);
    auto y = run("softmax_cross_entropy", {&z, &l});
    EXPECT_EQ(y[0].shape(), Shape{}) << "rank 0";
    EXPECT_LE(max_rel_diff(y[0], scalar(ref_loss(z, l))), 1e-12) << s.n << "x" << s.c;
    EXPECT_TRUE(bitwise_equal(y[0], run("softmax_cross_entropy", {&z, &l})[0])) << "deterministic";
  }
}

TEST(SoftmaxCrossEntropy, GradMatchesNaive) {
  for (const Size& s : kSizes) {
    Tensor z = logits64(s.n, s.c, 3), l = labels_of(s.n, s.c, 4);
    for (double dloss : {1.0, -0.37}) {
      const Tensor d = scalar(dloss);
      auto dz = run("softmax_cross_entropy_grad", {&z, &l, &d});
      EXPECT_LE(max_rel_diff(dz[0], ref_grad(z, l, dloss)), 1e-12) << s.n << "x" << s.c;
    }
  }
}

// The same logits at another address (shifted by 1 to 7 floats, so the vectorised exp and the row
// sums see every alignment) give bitwise the same loss and gradient: memory modes and orders place
// buffers differently and must still agree bit for bit.
TEST(SoftmaxCrossEntropy, BitwiseTheSameAtEveryAlignment) {
  const int64_t n = 3, c = 1037;
  const Tensor z = cast(logits64(n, c, 5), DType::f32), l = labels_of(n, c, 6);
  const OpDef& loss = op_registry().get("softmax_cross_entropy");
  const OpDef& grad = op_registry().get("softmax_cross_entropy_grad");
  Tensor d(DType::f32, {});
  d.as<float>()[0] = 0.7f;
  std::vector<float> ref_loss_bits, ref_grad_bits;
  for (int shift = 0; shift < 8; ++shift) {
    std::vector<float> zbuf(static_cast<size_t>(n * c + 8)), gbuf(static_cast<size_t>(n * c + 8)), ws(static_cast<size_t>(n + 8));
    std::memcpy(zbuf.data() + shift, z.data(), z.bytes());
    const TensorView zv{zbuf.data() + shift, z.type()}, gv{gbuf.data() + shift, z.type()};
    float out = 0;
    const TensorView ov{&out, TensorType{DType::f32, {}}};
    std::vector<TensorView> in{zv, l.view()}, o{ov};
    loss.cpu({in, o, nullptr, ws.data() + shift, static_cast<size_t>(n) * sizeof(float)});
    std::vector<TensorView> gin{zv, l.view(), d.view()}, go{gv};
    grad.cpu({gin, go, nullptr});
    std::vector<float> g(gbuf.begin() + shift, gbuf.begin() + shift + n * c);
    if (shift == 0) {
      ref_loss_bits = {out}, ref_grad_bits = g;
      continue;
    }
    EXPECT_EQ(std::memcmp(&out, ref_loss_bits.data(), sizeof(float)), 0) << "loss, shift " << shift;
    EXPECT_EQ(std::memcmp(g.data(), ref_grad_bits.data(), g.size() * sizeof(float)), 0) << "gradient, shift " << shift;
  }
}

// Logits near 1000 overflow exp(); the shifted computation gives the loss of z - 1000 (shift invariance).
TEST(SoftmaxCrossEntropy, StableForLargeLogits) {
  Tensor z = logits64(4, 6, 5, 3.0), l = labels_of(4, 6, 6);
  Tensor big = logits64(4, 6, 5, 3.0, 1000.0), neg = logits64(4, 6, 5, 3.0, -1000.0);
  const double want = ref_loss(z, l);
  const Tensor one = scalar(1.0);
  for (const Tensor* t : {&big, &neg}) {
    const double loss = get(run("softmax_cross_entropy", {t, &l})[0], 0);
    EXPECT_TRUE(std::isfinite(loss));
    EXPECT_NEAR(loss, want, 1e-10);
    auto dz = run("softmax_cross_entropy_grad", {t, &l, &one});
    EXPECT_LE(max_rel_diff(dz[0], ref_grad(z, l, 1.0)), 1e-10);
  }
  Tensor big32 = cast(big, DType::f32);
  Tensor one32(DType::f32, {});
  set(one32, 0, 1.0);
  const double loss32 = get(run("softmax_cross_entropy", {&big32, &l})[0], 0);
  EXPECT_TRUE(std::isfinite(loss32));
  auto dz32 = run("softmax_cross_entropy_grad", {&big32, &l, &one32});
  for (int64_t i = 0; i < dz32[0].numel(); ++i) ASSERT_TRUE(std::isfinite(get(dz32[0], i)));
}

// In float32, logits far from 0 and a batch of many rows keep the loss to float32's precision:
// log(s) + m rounded the loss to m's precision (equal logits of 1e7 gave 1.0 for ln 2, 1e8 gave 0),
// and a float sum of the row losses drifted (6e-4 relative at 65536 equal rows). Found by a hunt
// against PyTorch, whose float32 loss is within 4e-7 in both cases.
TEST(SoftmaxCrossEntropy, Float32LossKeepsItsPrecisionForLargeLogitsAndManyRows) {
  Tensor label0(DType::i32, {1});
  set(label0, 0, 0);
  for (double v : {1e3, 1e5, 1e6, 1e7, 1e8}) {
    Tensor z(DType::f32, {1, 2});
    set(z, 0, v), set(z, 1, v);
    const double loss = get(run("softmax_cross_entropy", {&z, &label0})[0], 0);
    EXPECT_NEAR(loss, std::log(2.0), 1e-6) << "logits " << v;
  }
  const int64_t rows = 65536;
  Tensor z(DType::f32, {rows, 2}), l(DType::i32, {rows});
  for (int64_t n = 0; n < rows; ++n) set(z, 2 * n, 0.1), set(z, 2 * n + 1, 0.0), set(l, n, 1);
  const double z0 = static_cast<double>(static_cast<float>(0.1));
  const double want = std::log(std::exp(z0) + 1.0);  // every row: log(e^z0 + e^0) - 0
  const double loss = get(run("softmax_cross_entropy", {&z, &l})[0], 0);
  EXPECT_LE(std::abs(loss - want) / want, 1e-6) << loss << " against " << want;
  // The same in linear_cross_entropy (the fused head): x = the logits, w = I, no bias.
  Tensor w(DType::f32, {2, 2}), b(DType::f32, {2});
  set(w, 0, 1), set(w, 1, 0), set(w, 2, 0), set(w, 3, 1), set(b, 0, 0), set(b, 1, 0);
  const double fused = get(run("linear_cross_entropy", {&z, &w, &b, &l})[0], 0);
  EXPECT_LE(std::abs(fused - want) / want, 1e-6) << fused << " against " << want;
}

// d loss / d logits from the training graph against central differences of the loss.
TEST(SoftmaxCrossEntropy, GradientMatchesCentralDifferences) {
  Graph g;
  const int zn = g.param("z", {DType::f64, {3, 5}}).node;
  EntryRef ln = g.input("labels", {DType::i32, {3}});
  EntryRef loss = g.add1("softmax_cross_entropy", {{zn, 0}, ln});
  TrainingGraph tg = build_training_graph(g, loss, {});
  ASSERT_EQ(tg.grads.size(), 1u);
  Tensor z = logits64(3, 5, 7), l = labels_of(3, 5, 8);
  Tensor dz = std::move(run_graph(tg.graph, {{"z", &z}, {"labels", &l}}, {tg.grads[0].grad})[0]);
  const double h = 1e-6;
  for (int64_t i = 0; i < z.numel(); ++i) {
    const double z0 = get(z, i);
    set(z, i, z0 + h);
    const double jp = get(run_graph(g, {{"z", &z}, {"labels", &l}}, {loss})[0], 0);
    set(z, i, z0 - h);
    const double jm = get(run_graph(g, {{"z", &z}, {"labels", &l}}, {loss})[0], 0);
    set(z, i, z0);
    EXPECT_NEAR(get(dz, i), (jp - jm) / (2 * h), 1e-8) << "logit " << i;
  }
}

TEST(SoftmaxCrossEntropy, LabelOutOfRangeNamesTheBatchIndex) {
  Tensor z = logits64(4, 5, 9), l = labels_of(4, 5, 10);
  set(l, 2, 5);
  std::string e = error_of([&] { run("softmax_cross_entropy", {&z, &l}); });
  EXPECT_NE(e.find("label 5 at batch index 2"), std::string::npos) << e;
  EXPECT_NE(e.find("[0, 5)"), std::string::npos) << e;
  set(l, 2, 0);
  set(l, 3, -1);
  const Tensor one = scalar(1.0);
  e = error_of([&] { run("softmax_cross_entropy_grad", {&z, &l, &one}); });
  EXPECT_NE(e.find("label -1 at batch index 3"), std::string::npos) << e;
}

TEST(SoftmaxCrossEntropy, ShapeErrorsAreClear) {
  Tensor z = logits64(4, 5, 11);
  Tensor short_labels = labels_of(3, 5, 12);
  std::string e = error_of([&] { run("softmax_cross_entropy", {&z, &short_labels}); });
  EXPECT_NE(e.find("labels must be int32[4]"), std::string::npos) << e;
  Tensor float_labels(DType::f64, {4});
  e = error_of([&] { run("softmax_cross_entropy", {&z, &float_labels}); });
  EXPECT_NE(e.find("got float64[4]"), std::string::npos) << e;
  Tensor z3(DType::f64, {2, 3, 4});
  e = error_of([&] { run("softmax_cross_entropy", {&z3, &short_labels}); });
  EXPECT_NE(e.find("[N,C] matrix"), std::string::npos) << e;
}

}  // namespace
}  // namespace mnemo::test
