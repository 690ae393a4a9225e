// relu, sigmoid, tanh, their backward ops and constant against naive float64 loops.
#include <cmath>
#include <cstring>

#include "test_util.h"

namespace mnemo::test {
namespace {

struct Act {
  const char* name;
  double (*f)(double);
  double (*df)(double y, double dy);  // from the output y
};

const Act kActs[] = {
    {"relu", [](double x) { return x > 0 ? x : 0.0; }, [](double y, double dy) { return y > 0 ? dy : 0.0; }},
    {"sigmoid", [](double x) { return 1.0 / (1.0 + std::exp(-x)); }, [](double y, double dy) { return dy * y * (1 - y); }},
    {"tanh", [](double x) { return std::tanh(x); }, [](double y, double dy) { return dy * (1 - y * y); }},
};

TEST(Activations, ForwardAndBackwardMatchNaiveLoops) {
  for (const Act& a : kActs) {
    for (const Shape& shape : {Shape{7}, Shape{3, 5, 4}, Shape{2, 3, 40, 40}}) {  // the last one takes the threaded path
      Tensor x(DType::f64, shape), dy(DType::f64, shape);
      fill_distinct(x, 3, 4.0);
      fill_distinct(dy, 4);
      Tensor y = std::move(run(a.name, {&x})[0]);
      Tensor ref(DType::f64, shape);
      for (int64_t i = 0; i < x.numel(); ++i) set(ref, i, a.f(get(x, i)));
      EXPECT_LE(max_rel_diff(y, ref), 1e-15) << a.name << " " << shape_str(shape);
      Tensor dx = std::move(run(std::string(a.name) + "_grad", {&ref, &dy})[0]);
      Tensor dref(DType::f64, shape);
      for (int64_t i = 0; i < x.numel(); ++i) set(dref, i, a.df(get(ref, i), get(dy, i)));
      EXPECT_LE(max_rel_diff(dx, dref), 1e-15) << a.name << "_grad " << shape_str(shape);
    }
  }
}

// sigmoid and tanh (Eigen's vectorised functions) give bitwise the same values at every address
// alignment and every length: each element goes through the same packet code (vectorized_map).
TEST(Activations, BitwiseTheSameAtEveryAlignment) {
  for (const char* op : {"sigmoid", "tanh"}) {
    const OpDef& d = op_registry().get(op);
    const int64_t n = 1000;
    const Tensor x = cast(rand64({n}, 12, 3.0), DType::f32);
    std::vector<float> ref(static_cast<size_t>(n));
    for (int shift = 0; shift < 8; ++shift)
      for (int64_t len : {n, int64_t{13}}) {
        std::vector<float> xb(static_cast<size_t>(n + 8)), yb(static_cast<size_t>(n + 8));
        std::memcpy(xb.data() + shift, x.data(), static_cast<size_t>(len) * sizeof(float));
        const TensorType t{DType::f32, {len}};
        std::vector<TensorView> in{{xb.data() + shift, t}}, out{{yb.data() + shift, t}};
        d.cpu({in, out, nullptr});
        if (shift == 0 && len == n) {
          std::memcpy(ref.data(), yb.data(), static_cast<size_t>(n) * sizeof(float));
          continue;
        }
        EXPECT_EQ(std::memcmp(yb.data() + shift, ref.data(), static_cast<size_t>(len) * sizeof(float)), 0)
            << op << " shift " << shift << " length " << len;
      }
  }
}

TEST(Activations, TypeErrorsAreClear) {
  Graph g;
  EntryRef x = g.input("x", {DType::f32, {2, 3}});
  EntryRef y = g.input("y", {DType::f32, {3, 2}});
  try {
    g.add("relu_grad", {x, y}, {}, "bad");
    FAIL();
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("must have the same type"), std::string::npos) << e.what();
  }
}

TEST(Constant, FillsEveryDtype) {
  for (const char* dt : {"float32", "float64", "int32"}) {
    Graph g;
    const int id = g.add("constant", {}, {{"shape", std::vector<int64_t>{2, 3}}, {"dtype", std::string(dt)}, {"value", 3.0}}, "c");
    Tensor t = std::move(run_graph(g, {}, {{id, 0}})[0]);
    for (int64_t i = 0; i < 6; ++i) EXPECT_EQ(get(t, i), 3.0) << dt;
  }
}

}  // namespace
}  // namespace mnemo::test
