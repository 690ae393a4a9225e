// slice, slice_grad, split and concat against naive index-by-index float64 references on axes 0,
// 1 and the last axis of rank-3 and rank-4 tensors; split's gradient with missing piece gradients;
// clear errors.
#include "autograd/gradient.h"
#include <cstring>

#include "test_util.h"

namespace mnemo::test {
namespace {

// Multi-index <-> flat index, row-major.
std::vector<int64_t> unravel(int64_t i, const Shape& s) {
  std::vector<int64_t> idx(s.size());
  for (size_t k = s.size(); k-- > 0;) {
    idx[k] = i % s[k];
    i /= s[k];
  }
  return idx;
}
int64_t ravel(const std::vector<int64_t>& idx, const Shape& s) {
  int64_t i = 0;
  for (size_t k = 0; k < s.size(); ++k) i = i * s[k] + idx[k];
  return i;
}

Tensor ref_slice(const Tensor& x, int axis, int64_t b, int64_t e) {
  Shape s = x.shape();
  s[axis] = e - b;
  Tensor y(DType::f64, s);
  for (int64_t i = 0; i < y.numel(); ++i) {
    auto idx = unravel(i, s);
    idx[axis] += b;
    set(y, i, get(x, ravel(idx, x.shape())));
  }
  return y;
}

Tensor ref_slice_grad(const Tensor& dy, int axis, int64_t b, const Shape& in) {
  Tensor dx(DType::f64, in);
  for (int64_t i = 0; i < dx.numel(); ++i) set(dx, i, 0.0);
  for (int64_t i = 0; i < dy.numel(); ++i) {
    auto idx = unravel(i, dy.shape());
    idx[axis] += b;
    set(dx, ravel(idx, in), get(dy, i));
  }
  return dx;
}

Tensor ref_concat(const std::vector<Tensor>& xs, int axis) {
  Shape s = xs[0].shape();
  s[axis] = 0;
  for (const Tensor& x : xs) s[axis] += x.shape()[axis];
  Tensor y(DType::f64, s);
  for (int64_t i = 0; i < y.numel(); ++i) {
    auto idx = unravel(i, s);
    size_t j = 0;
    while (idx[axis] >= xs[j].shape()[axis]) idx[axis] -= xs[j++].shape()[axis];
    set(y, i, get(xs[j], ravel(idx, xs[j].shape())));
  }
  return y;
}

struct Case {
  Shape shape;
  int axis;
};
// Axes 0, 1 and last of rank 3 and 4, plus a large one (multithreaded copies).
const Case kCases[] = {{{3, 4, 5}, 0}, {{3, 4, 5}, 1}, {{3, 4, 5}, 2}, {{2, 3, 4, 6}, 0},
                       {{2, 3, 4, 6}, 1}, {{2, 3, 4, 6}, 3}, {{8, 64, 96}, 1}, {{64, 8, 96}, 0}};

TEST(SliceConcat, SliceMatchesNaive) {
  for (const Case& c : kCases) {
    Tensor x = rand64(c.shape, 1);
    const int64_t n = c.shape[c.axis];
    for (auto [b, e] : {std::pair<int64_t, int64_t>{0, 1}, {1, n}, {n / 2, n - 1 > n / 2 ? n - 1 : n}}) {
      auto y = run("slice", {&x}, {{"axis", int64_t{c.axis}}, {"begin", b}, {"end", e}});
      EXPECT_TRUE(bitwise_equal(y[0], ref_slice(x, c.axis, b, e))) << shape_str(c.shape) << " axis " << c.axis;
    }
  }
}

TEST(SliceConcat, SliceNegativeAxisAndIndices) {
  Tensor x = rand64({2, 3, 4, 6}, 2);
  auto y = run("slice", {&x}, {{"axis", int64_t{-1}}, {"begin", int64_t{-4}}, {"end", int64_t{-1}}});
  EXPECT_TRUE(bitwise_equal(y[0], ref_slice(x, 3, 2, 5)));
  auto z = run("slice", {&x}, {{"axis", int64_t{-3}}, {"begin", int64_t{1}}});
  EXPECT_TRUE(bitwise_equal(z[0], ref_slice(x, 1, 1, 3))) << "end defaults to the extent";
  Tensor ints(DType::i32, {4, 5});
  fill_ints(ints, 3, 100);
  auto w = run("slice", {&ints}, {{"axis", int64_t{1}}, {"begin", int64_t{1}}, {"end", int64_t{3}}});
  for (int64_t r = 0; r < 4; ++r)
    for (int64_t k = 0; k < 2; ++k) EXPECT_EQ(get(w[0], r * 2 + k), get(ints, r * 5 + 1 + k));
}

TEST(SliceConcat, SliceGradMatchesNaive) {
  for (const Case& c : kCases) {
    const int64_t n = c.shape[c.axis];
    const int64_t b = n / 3, len = std::max<int64_t>(1, n / 2);
    Shape ds = c.shape;
    ds[c.axis] = len;
    Tensor dy = rand64(ds, 3);
    auto dx = run("slice_grad", {&dy},
                     {{"axis", int64_t{c.axis}}, {"begin", b}, {"input_shape", std::vector<int64_t>(c.shape)}});
    EXPECT_TRUE(bitwise_equal(dx[0], ref_slice_grad(dy, c.axis, b, c.shape)))
        << shape_str(c.shape) << " axis " << c.axis;
  }
}

TEST(SliceConcat, SplitWithSizesAndPartsMatchesNaive) {
  for (const Case& c : kCases) {
    Tensor x = rand64(c.shape, 4);
    const int64_t n = c.shape[c.axis];
    std::vector<int64_t> sizes = n == 1 ? std::vector<int64_t>{1} : std::vector<int64_t>{1, n - 1};
    if (n >= 4) sizes = {1, n - 3, 2};
    auto ys = run("split", {&x}, {{"axis", int64_t{c.axis}}, {"sizes", sizes}});
    ASSERT_EQ(ys.size(), sizes.size());
    int64_t off = 0;
    for (size_t j = 0; j < sizes.size(); ++j) {
      EXPECT_TRUE(bitwise_equal(ys[j], ref_slice(x, c.axis, off, off + sizes[j])))
          << shape_str(c.shape) << " piece " << j;
      off += sizes[j];
    }
    const int64_t parts = n % 2 == 0 ? 2 : n;
    auto ps = run("split", {&x}, {{"axis", int64_t{c.axis}}, {"parts", parts}});
    ASSERT_EQ(static_cast<int64_t>(ps.size()), parts);
    for (int64_t j = 0; j < parts; ++j)
      EXPECT_TRUE(bitwise_equal(ps[j], ref_slice(x, c.axis, j * (n / parts), (j + 1) * (n / parts))));
  }
}

TEST(SliceConcat, ConcatMatchesNaive) {
  for (const Case& c : kCases) {
    std::vector<Tensor> xs;
    for (int64_t k : {int64_t{1}, c.shape[c.axis], int64_t{2}}) {
      Shape s = c.shape;
      s[c.axis] = k;
      xs.push_back(rand64(s, 5 + xs.size()));
    }
    auto y = run_op("concat", xs, {{"axis", int64_t{c.axis}}});
    EXPECT_TRUE(bitwise_equal(y[0], ref_concat(xs, c.axis))) << shape_str(c.shape) << " axis " << c.axis;
    auto single = run("concat", {&xs[1]}, {{"axis", int64_t{c.axis}}});
    EXPECT_TRUE(bitwise_equal(single[0], xs[1]));
  }
}

// Only piece 1 of a split gets a gradient: dx is that gradient in place, zeros elsewhere.
TEST(SliceConcat, SplitGradFillsMissingPiecesWithZeros) {
  Graph g;
  const int x = g.param("x", {DType::f64, {2, 6, 3}}).node;
  const int s = g.add("split", {{x, 0}}, {{"axis", int64_t{1}}, {"parts", int64_t{3}}});
  EntryRef r = g.input("r", g.node(s).outputs[1]);
  TrainingGraph tg = build_gradient_graph(g, {{{s, 1}, r}}, {x}, {});
  Tensor xv = rand64({2, 6, 3}, 7), rv = rand64({2, 2, 3}, 8);
  auto dx = run_graph(tg.graph, {{"x", &xv}, {"r", &rv}}, {tg.grads[0].grad});
  Tensor scattered = ref_slice_grad(rv, 1, 2, {2, 6, 3});
  EXPECT_TRUE(bitwise_equal(dx[0], scattered));
  // No gradient at all reaches the split: its grad returns none.
  const Node n = g.node(s);
  auto none = n.op->grad(
      g, GradContext{n, {{x, 0}}, {{s, 0}, {s, 1}, {s, 2}}, {std::nullopt, std::nullopt, std::nullopt}});
  ASSERT_EQ(none.size(), 1u);
  EXPECT_FALSE(none[0].has_value());
}

TEST(SliceConcat, ConcatGradIsOneSplit) {
  Graph g;
  EntryRef a = g.param("a", {DType::f64, {2, 1, 3}});
  EntryRef b = g.param("b", {DType::f64, {2, 4, 3}});
  const int c = g.add("concat", {a, b}, {{"axis", int64_t{-2}}});
  EntryRef dy = g.input("dy", g.node(c).outputs[0]);
  const Node n = g.node(c);
  auto dx = n.op->grad(g, GradContext{n, {a, b}, {{c, 0}}, {dy}});
  ASSERT_EQ(dx.size(), 2u);
  EXPECT_EQ(dx[0]->node, dx[1]->node);
  EXPECT_EQ(g.node(dx[0]->node).op->name, "split");
  EXPECT_EQ(g.type(*dx[0]), g.type(a));
  EXPECT_EQ(g.type(*dx[1]), g.type(b));
}

TEST(SliceConcat, BadAttributesAreClearErrors) {
  Tensor x = rand64({2, 6, 3}, 9);
  std::string e = error_of([&] { run("split", {&x}, {{"axis", int64_t{1}}, {"sizes", std::vector<int64_t>{2, 3}}}); });
  EXPECT_NE(e.find("sizes [2,3] sum to 5"), std::string::npos) << e;
  EXPECT_NE(e.find("extent 6"), std::string::npos) << e;
  e = error_of([&] { run("split", {&x}, {{"axis", int64_t{1}}, {"parts", int64_t{4}}}); });
  EXPECT_NE(e.find("4 parts do not divide extent 6"), std::string::npos) << e;
  e = error_of([&] { run("split", {&x}, {{"axis", int64_t{1}}}); });
  EXPECT_NE(e.find("exactly one of"), std::string::npos) << e;
  e = error_of([&] { run("slice", {&x}, {{"axis", int64_t{1}}, {"begin", int64_t{2}}, {"end", int64_t{7}}}); });
  EXPECT_NE(e.find("outside axis 1 of extent 6"), std::string::npos) << e;
  e = error_of([&] { run("slice", {&x}, {{"axis", int64_t{3}}, {"end", int64_t{1}}}); });
  EXPECT_NE(e.find("axis 3 is out of range"), std::string::npos) << e;
  Tensor y = rand64({2, 5, 4}, 10);
  e = error_of([&] { run("concat", {&x, &y}, {{"axis", int64_t{1}}}); });
  EXPECT_NE(e.find("input 1 is float64[2,5,4]"), std::string::npos) << e;
  e = error_of([&] {
    run("slice_grad", {&x},
        {{"axis", int64_t{1}}, {"begin", int64_t{2}}, {"input_shape", std::vector<int64_t>{2, 7, 3}}});
  });
  EXPECT_NE(e.find("exceeds the input extent 7"), std::string::npos) << e;
  // stack_rows: x's rows must lie inside the stack, with its dtype and its other dims
  Tensor stack = rand64({5, 3}, 11), rows = rand64({2, 3}, 12), wide = rand64({2, 4}, 13);
  e = error_of([&] { run("stack_rows", {&stack, &rows}, {{"begin", int64_t{4}}}); });
  EXPECT_NE(e.find("rows [4, 6) are outside the stack's 5 rows"), std::string::npos) << e;
  e = error_of([&] { run("stack_rows", {&stack, &wide}, {{"begin", int64_t{0}}}); });
  EXPECT_NE(e.find("x must have stack's dtype and its dims after the first"), std::string::npos) << e;
  e = error_of([&] { run("stack_rows", {&stack, &rows}); });
  EXPECT_NE(e.find("begin"), std::string::npos) << e;
  e = error_of([&] { run("stack_rows_grad", {&stack}, {{"begin", int64_t{3}}, {"rows", int64_t{3}}}); });
  EXPECT_NE(e.find("rows [3, 6) are outside dy float64[5,3]"), std::string::npos) << e;
}

}  // namespace
}  // namespace mnemo::test
