// add, mul, add_n, copy and identity against naive float64 loops; type-mismatch errors.
#include <cstring>

#include "test_util.h"

namespace mnemo::test {
namespace {

// Small and large (multithreaded) shapes.
const Shape kShapes[] = {{3, 4, 5}, {7}, {64, 33, 20}};

TEST(Elementwise, AddAndMulMatchNaive) {
  for (const Shape& s : kShapes) {
    Tensor a = rand64(s, 1), b = rand64(s, 2);
    Tensor sum(DType::f64, s), prod(DType::f64, s);
    for (int64_t i = 0; i < a.numel(); ++i) {
      set(sum, i, get(a, i) + get(b, i));
      set(prod, i, get(a, i) * get(b, i));
    }
    EXPECT_LE(max_rel_diff(run("add", {&a, &b})[0], sum), 1e-12) << shape_str(s);
    EXPECT_LE(max_rel_diff(run("mul", {&a, &b})[0], prod), 1e-12) << shape_str(s);
  }
}

TEST(Elementwise, AddNWithOneAndFourInputsSumsInOrder) {
  for (const Shape& s : kShapes) {
    for (int k : {1, 2, 4}) {
      std::vector<Tensor> xs;
      for (int j = 0; j < k; ++j) xs.push_back(rand64(s, 10 + j));
      Tensor ref(DType::f64, s);
      for (int64_t i = 0; i < ref.numel(); ++i) {
        double acc = get(xs[0], i);
        for (int j = 1; j < k; ++j) acc += get(xs[j], i);
        set(ref, i, acc);
      }
      auto y = run_op("add_n", xs);
      EXPECT_TRUE(bitwise_equal(y[0], ref)) << "k=" << k << " " << shape_str(s) << ": left-to-right order";
    }
  }
}

TEST(Elementwise, CopyAndIdentityReturnTheInput) {
  for (const Shape& s : kShapes) {
    Tensor x = rand64(s, 3);
    EXPECT_TRUE(bitwise_equal(run("copy", {&x})[0], x));
    EXPECT_TRUE(bitwise_equal(run("identity", {&x})[0], x));
  }
  Tensor labels(DType::i32, {5});
  fill_ints(labels, 1, 9);
  EXPECT_TRUE(bitwise_equal(run("copy", {&labels})[0], labels));
}

TEST(Elementwise, IdentityIsAViewAndCopyIsNot) {
  EXPECT_EQ(op_registry().get("identity").kind, OpKind::view);
  EXPECT_EQ(op_registry().get("copy").kind, OpKind::compute);
  EXPECT_TRUE(op_registry().get("copy").inplace.empty());
}

TEST(Elementwise, AddGradIsDyItselfAndMulGradBuildsMuls) {
  Graph g;
  EntryRef a = g.param("a", {DType::f64, {2, 3}});
  EntryRef b = g.param("b", {DType::f64, {2, 3}});
  const int add = g.add("add", {a, b});
  const int mul = g.add("mul", {a, b});
  EntryRef dy = g.input("dy", {DType::f64, {2, 3}});
  const size_t before = g.size();
  auto d_add = g.node(add).op->grad(g, GradContext{g.node(add), {a, b}, {{add, 0}}, {dy}});
  EXPECT_EQ(g.size(), before) << "add's grad builds no node";
  ASSERT_EQ(d_add.size(), 2u);
  EXPECT_EQ(*d_add[0], dy);
  EXPECT_EQ(*d_add[1], dy);
  const Node mul_node = g.node(mul);
  auto d_mul = mul_node.op->grad(g, GradContext{mul_node, {a, b}, {{mul, 0}}, {dy}});
  ASSERT_EQ(d_mul.size(), 2u);
  EXPECT_EQ(g.node(d_mul[0]->node).op->name, "mul");
  EXPECT_EQ(g.node(d_mul[0]->node).inputs, (std::vector<EntryRef>{dy, b}));
  EXPECT_EQ(g.node(d_mul[1]->node).inputs, (std::vector<EntryRef>{dy, a}));
}

TEST(Elementwise, MismatchedTypesAreClearErrors) {
  Tensor a = rand64({2, 3}, 1), b = rand64({3}, 2), c = rand64({3, 2}, 3);
  Tensor f32(DType::f32, {2, 3});
  std::string e = error_of([&] { run("add", {&a, &b}); });
  EXPECT_NE(e.find("no broadcasting"), std::string::npos) << e;
  EXPECT_NE(e.find("float64[3]"), std::string::npos) << e;
  EXPECT_NE(e.find("float64[2,3]"), std::string::npos) << e;
  e = error_of([&] { run("add", {&a, &c}); });
  EXPECT_NE(e.find("float64[3,2]"), std::string::npos) << e;
  e = error_of([&] { run("mul", {&a, &f32}); });
  EXPECT_NE(e.find("float32[2,3]"), std::string::npos) << e;
  e = error_of([&] { run("add_n", {&a, &a, &b}); });
  EXPECT_NE(e.find("input 2"), std::string::npos) << e;
  Tensor ints(DType::i32, {2, 3});
  e = error_of([&] { run("add", {&ints, &ints}); });
  EXPECT_NE(e.find("float32 or float64"), std::string::npos) << e;
}

}  // namespace
}  // namespace mnemo::test
