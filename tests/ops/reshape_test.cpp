// reshape and flatten: inferred shapes (with -1), values unchanged (views), the backward reshape,
// and clear errors for impossible shapes.
#include <cstring>

#include "test_util.h"

namespace mnemo::test {
namespace {

TEST(Reshape, ShapesWithMinusOneAndValuesUnchanged) {
  Tensor x = rand64({2, 3, 4}, 1);
  const std::pair<std::vector<int64_t>, Shape> cases[] = {
      {{-1, 4}, {6, 4}}, {{4, -1, 2}, {4, 3, 2}}, {{24}, {24}}, {{-1}, {24}}, {{2, 12, 1}, {2, 12, 1}}};
  for (const auto& [attr, want] : cases) {
    auto y = run("reshape", {&x}, {{"shape", attr}});
    EXPECT_EQ(y[0].shape(), want) << shape_str(attr);
    for (int64_t i = 0; i < x.numel(); ++i) ASSERT_EQ(get(y[0], i), get(x, i));
  }
}

TEST(Reshape, FlattenAxisOneAndTwo) {
  Tensor x = rand64({2, 3, 4, 5}, 2);
  const std::pair<int64_t, Shape> cases[] = {{1, {2, 60}},  {2, {6, 20}},  {3, {24, 5}},
                                             {0, {1, 120}}, {4, {120, 1}}, {-1, {24, 5}}};
  for (const auto& [axis, want] : cases) {
    auto y = run("flatten", {&x}, {{"axis", axis}});
    EXPECT_EQ(y[0].shape(), want) << "axis " << axis;
    for (int64_t i = 0; i < x.numel(); ++i) ASSERT_EQ(get(y[0], i), get(x, i));
  }
  EXPECT_EQ(run("flatten", {&x})[0].shape(), (Shape{2, 60})) << "default axis 1";
}

TEST(Reshape, BothAreViewsAndTheirGradReshapesBack) {
  for (const char* op : {"reshape", "flatten"}) {
    EXPECT_EQ(op_registry().get(op).kind, OpKind::view) << op;
    Graph g;
    EntryRef x = g.param("x", {DType::f64, {2, 3, 4}});
    Attrs a;
    if (std::string(op) == "reshape") a = {{"shape", std::vector<int64_t>{4, -1}}};
    const int id = g.add(op, {x}, a);
    EntryRef dy = g.input("dy", g.node(id).outputs[0]);
    const Node n = g.node(id);
    auto dx = n.op->grad(g, GradContext{n, {x}, {{id, 0}}, {dy}});
    ASSERT_EQ(dx.size(), 1u);
    EXPECT_EQ(g.node(dx[0]->node).op->name, "reshape");
    EXPECT_EQ(g.type(*dx[0]), g.type(x)) << op;
  }
}

TEST(Reshape, BadShapesAreClearErrors) {
  Tensor x = rand64({2, 3}, 3);
  std::string e = error_of([&] { run("reshape", {&x}, {{"shape", std::vector<int64_t>{4, 2}}}); });
  EXPECT_NE(e.find("cannot reshape float64[2,3] (6 elements) to [4,2] (8 elements)"), std::string::npos) << e;
  e = error_of([&] { run("reshape", {&x}, {{"shape", std::vector<int64_t>{4, -1}}}); });
  EXPECT_NE(e.find("not a multiple of 4"), std::string::npos) << e;
  e = error_of([&] { run("reshape", {&x}, {{"shape", std::vector<int64_t>{-1, -1}}}); });
  EXPECT_NE(e.find("at most one -1"), std::string::npos) << e;
  e = error_of([&] { run("reshape", {&x}, {{"shape", std::vector<int64_t>{-2, 3}}}); });
  EXPECT_NE(e.find("negative"), std::string::npos) << e;
  e = error_of([&] { run("reshape", {&x}); });
  EXPECT_NE(e.find("shape"), std::string::npos) << e;
  e = error_of([&] { run("flatten", {&x}, {{"axis", int64_t{3}}}); });
  EXPECT_NE(e.find("axis 3 is out of range"), std::string::npos) << e;
}

}  // namespace
}  // namespace mnemo::test
