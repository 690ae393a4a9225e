// dropout and dropout_grad (ops/dropout.cpp): the drop rate, the 1/(1-p) scaling, masks that are a
// function of (seed, step, index) only (the backward op and a recomputation see the forward's
// mask), the builder's rng input and evaluation graphs, resume with dropout, bad attributes.
#include <cmath>

#include "models/zoo.h"
#include "test_util.h"

namespace mnemo::test {
namespace {

Tensor step_tensor(int32_t s) {
  Tensor t(DType::i32, {1});
  t.as<int32_t>()[0] = s;
  return t;
}

Attrs attrs(double p, int64_t seed) { return {{"p", p}, {"seed", seed}}; }

TEST(Dropout, DropsAFractionPAndScalesTheRest) {
  for (double p : {0.1, 0.5, 0.8}) {
    Tensor x(DType::f32, {200, 500});
    fill_distinct(x, 3, 2.0);
    for (int64_t i = 0; i < x.numel(); ++i)
      if (x.as<float>()[i] == 0) x.as<float>()[i] = 1;  // a zero input would look dropped
    const Tensor st = step_tensor(5);
    const Tensor y = std::move(run("dropout", {&x, &st}, attrs(p, 11))[0]);
    const float s = 1.0f / (1.0f - static_cast<float>(p));
    int64_t dropped = 0;
    for (int64_t i = 0; i < x.numel(); ++i) {
      const float v = y.as<float>()[i];
      if (v == 0) ++dropped;
      else ASSERT_EQ(v, x.as<float>()[i] * s) << "element " << i;
    }
    const double rate = static_cast<double>(dropped) / static_cast<double>(x.numel());
    // 100000 draws: the standard deviation of the rate is below 0.0016.
    EXPECT_NEAR(rate, p, 0.01) << "p " << p;
  }
}

TEST(Dropout, MaskDependsOnSeedAndStepOnlyAndTheGradientUsesIt) {
  Tensor x(DType::f64, {4, 1000}), dy(DType::f64, {4, 1000});
  fill_distinct(x, 7, 3.0);
  fill_distinct(dy, 8);
  for (int64_t i = 0; i < x.numel(); ++i)
    if (get(x, i) == 0) set(x, i, 0.5);
  const Tensor s1 = step_tensor(1), s2 = step_tensor(2);
  const Tensor a = std::move(run("dropout", {&x, &s1}, attrs(0.5, 3))[0]);
  const Tensor again = std::move(run("dropout", {&x, &s1}, attrs(0.5, 3))[0]);
  const Tensor other_step = std::move(run("dropout", {&x, &s2}, attrs(0.5, 3))[0]);
  const Tensor other_seed = std::move(run("dropout", {&x, &s1}, attrs(0.5, 4))[0]);
  EXPECT_TRUE(bitwise_equal(a, again));
  EXPECT_FALSE(bitwise_equal(a, other_step));
  EXPECT_FALSE(bitwise_equal(a, other_seed));
  // The backward op applies the same mask to dy: dx = dy * 2 where y = x * 2, else 0.
  const Tensor dx = std::move(run("dropout_grad", {&dy, &s1}, attrs(0.5, 3))[0]);
  for (int64_t i = 0; i < x.numel(); ++i) {
    const bool kept = get(a, i) != 0;
    ASSERT_EQ(get(dx, i), kept ? get(dy, i) * 2.0 : 0.0) << "element " << i;
  }
  // float32 and float64 draw the same mask.
  const Tensor x32 = cast(x, DType::f32);
  const Tensor a32 = std::move(run("dropout", {&x32, &s1}, attrs(0.5, 3))[0]);
  for (int64_t i = 0; i < x.numel(); ++i) ASSERT_EQ(get(a32, i) != 0, get(a, i) != 0) << "element " << i;
}

TEST(Dropout, BadAttributesAndInputsAreClearErrors) {
  Graph g;
  EntryRef x = g.input("x", {DType::f32, {3}}), st = g.input("s", {DType::i32, {1}}), f = g.input("f", {DType::f32, {1}});
  auto message = [&](std::vector<EntryRef> in, const Attrs& a) {
    try {
      g.add("dropout", in, a);
    } catch (const Error& e) {
      return std::string(e.what());
    }
    return std::string("no error");
  };
  EXPECT_NE(message({x, st}, attrs(1.0, 0)).find("[0, 1)"), std::string::npos);
  EXPECT_NE(message({x, st}, attrs(-0.1, 0)).find("[0, 1)"), std::string::npos);
  EXPECT_NE(message({x, f}, attrs(0.5, 0)).find("int32 step counter"), std::string::npos);
}

TEST(Dropout, TrainingGraphsReadTheStepInputAndEvaluationGraphsHaveNoDropout) {
  ZooConfig c;
  c.arch = "mobilenet_v2", c.width_mult = 0.25, c.batch = 2, c.height = c.width = 32, c.classes = 4;
  const BuiltModel train = build_zoo_model(c);
  const Graph& g = train.builder.graph();
  const int step = g.find(kRngStep);
  ASSERT_GE(step, 0);
  EXPECT_EQ(g.node(step).outputs[0], (TensorType{DType::i32, {1}}));
  int dropouts = 0;
  for (int v = 0; v < static_cast<int>(g.size()); ++v) dropouts += g.node(v).is(OpKind::compute) && g.node(v).op->name == "dropout";
  EXPECT_EQ(dropouts, 1);
  c.training = false;
  const BuiltModel eval = build_zoo_model(c);
  EXPECT_LT(eval.builder.graph().find(kRngStep), 0);
  EXPECT_LT(eval.builder.graph().find("classifier/0"), 0);
}

}  // namespace
}  // namespace mnemo::test
