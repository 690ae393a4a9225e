// max_pool2d, avg_pool2d, global_avg_pool and their backward ops against naive float64 loops
// (windows with and without padding and overlap, ties, NaN); shape and attribute errors.
#include <cmath>
#include <cstring>
#include <limits>

#include "test_util.h"

namespace mnemo::test {
namespace {

struct Window {
  int64_t r, s, sh, sw, ph, pw;
  bool ceil_mode = false;
  Attrs attrs() const {
    Attrs a{{"kernel", std::vector<int64_t>{r, s}}, {"stride", std::vector<int64_t>{sh, sw}},
            {"padding", std::vector<int64_t>{ph, pw}}};
    if (ceil_mode) a["ceil_mode"] = true;
    return a;
  }
};
// PyTorch's pooling_output_shape: floor, or ceil with the last window starting inside the input or
// its left padding.
int64_t extent(int64_t in, int64_t k, int64_t st, int64_t pad, bool ceil_mode) {
  int64_t out = (in + 2 * pad - k + (ceil_mode ? st - 1 : 0)) / st + 1;
  if (ceil_mode && (out - 1) * st >= in + pad) --out;
  return out;
}
// kernel 3 stride 2 padding 1 (overlapping), kernel 2 stride 2, and an asymmetric overlapping one.
const Window kWindows[] = {{3, 3, 2, 2, 1, 1}, {2, 2, 2, 2, 0, 0}, {3, 2, 1, 2, 1, 0}};
const Shape kShapes[] = {{2, 3, 5, 6}, {3, 3, 7, 7}, {2, 3, 6, 5}};

// Naive loops over the window cells of output (n, c, p, q), in row-major (r, s) order.
struct Naive {
  Window w;
  int64_t N, C, H, W, P, Q;
  Naive(const Window& win, const Shape& x)
      : w(win), N(x[0]), C(x[1]), H(x[2]), W(x[3]), P(extent(H, win.r, win.sh, win.ph, win.ceil_mode)),
        Q(extent(W, win.s, win.sw, win.pw, win.ceil_mode)) {}
  int64_t xi(int64_t n, int64_t c, int64_t h, int64_t x) const { return ((n * C + c) * H + h) * W + x; }
  int64_t yi(int64_t n, int64_t c, int64_t p, int64_t q) const { return ((n * C + c) * P + p) * Q + q; }
  template <class F>  // f(input index) for each in-input cell of the window
  void cells(int64_t n, int64_t c, int64_t p, int64_t q, F f) const {
    for (int64_t r = 0; r < w.r; ++r)
      for (int64_t s = 0; s < w.s; ++s) {
        const int64_t h = p * w.sh - w.ph + r, x = q * w.sw - w.pw + s;
        if (h >= 0 && h < H && x >= 0 && x < W) f(xi(n, c, h, x));
      }
  }
  template <class F>  // f(n, c, p, q, output index)
  void outputs(F f) const {
    for (int64_t n = 0; n < N; ++n)
      for (int64_t c = 0; c < C; ++c)
        for (int64_t p = 0; p < P; ++p)
          for (int64_t q = 0; q < Q; ++q) f(n, c, p, q, yi(n, c, p, q));
  }
  Shape y_shape() const { return {N, C, P, Q}; }
  // Window cells inside the padded input [-ph, H+ph) x [-pw, W+pw) (count_include_pad's divisor).
  double padded_cells(int64_t p, int64_t q) const {
    double n = 0;
    for (int64_t r = 0; r < w.r; ++r)
      for (int64_t s = 0; s < w.s; ++s) {
        const int64_t h = p * w.sh - w.ph + r, x = q * w.sw - w.pw + s;
        n += h < H + w.ph && x < W + w.pw;
      }
    return n;
  }
  // The first maximal cell (strict >), or the first NaN.
  int64_t winner(const Tensor& x, int64_t n, int64_t c, int64_t p, int64_t q) const {
    int64_t best = -1;
    cells(n, c, p, q, [&](int64_t i) {
      if (best >= 0 && std::isnan(get(x, best))) return;
      if (best < 0 || std::isnan(get(x, i)) || get(x, i) > get(x, best)) best = i;
    });
    return best;
  }
};

std::vector<Tensor> naive_max(const Naive& nv, const Tensor& x, const Tensor& dy) {
  Tensor y(DType::f64, nv.y_shape()), dx(DType::f64, x.shape());
  dx.zero();
  nv.outputs([&](int64_t n, int64_t c, int64_t p, int64_t q, int64_t o) {
    const int64_t b = nv.winner(x, n, c, p, q);
    set(y, o, get(x, b));
    set(dx, b, get(dx, b) + get(dy, o));
  });
  std::vector<Tensor> out;
  out.push_back(std::move(y));
  out.push_back(std::move(dx));
  return out;
}

std::vector<Tensor> naive_avg(const Naive& nv, const Tensor& x, const Tensor& dy, bool include_pad) {
  Tensor y(DType::f64, nv.y_shape()), dx(DType::f64, x.shape());
  dx.zero();
  nv.outputs([&](int64_t n, int64_t c, int64_t p, int64_t q, int64_t o) {
    double sum = 0, cnt = 0;
    nv.cells(n, c, p, q, [&](int64_t i) { sum += get(x, i), cnt += 1; });
    const double div = include_pad ? nv.padded_cells(p, q) : cnt;
    set(y, o, sum / div);
    nv.cells(n, c, p, q, [&](int64_t i) { set(dx, i, get(dx, i) + get(dy, o) / div); });
  });
  std::vector<Tensor> out;
  out.push_back(std::move(y));
  out.push_back(std::move(dx));
  return out;
}

TEST(MaxPool2d, ForwardAndBackwardMatchNaive) {
  for (const Window& w : kWindows)
    for (const Shape& s : kShapes) {
      const Naive nv(w, s);
      Tensor x = rand64(s, 1), dy = rand64(nv.y_shape(), 2);
      auto ref = naive_max(nv, x, dy);
      auto y = run("max_pool2d", {&x}, w.attrs());
      EXPECT_TRUE(bitwise_equal(y[0], ref[0])) << shape_str(s) << " kernel " << w.r << "x" << w.s;
      auto dx = run("max_pool2d_grad", {&x, &y[0], &dy}, w.attrs());
      EXPECT_LE(max_rel_diff(dx[0], ref[1]), 1e-12) << shape_str(s) << " kernel " << w.r << "x" << w.s;
    }
}

TEST(MaxPool2d, TiesGoToTheFirstMaximalCellInRowMajorOrder) {
  for (const Window& w : kWindows)
    for (const Shape& s : kShapes) {
      const Naive nv(w, s);
      Tensor x(DType::f64, s), dy = rand64(nv.y_shape(), 3);
      fill_ints(x, 4, 3);  // values 0, 1, 2: many ties
      for (int64_t i = 0; i < x.numel(); i += 5) set(x, i, -0.0);
      auto ref = naive_max(nv, x, dy);
      auto y = run("max_pool2d", {&x}, w.attrs());
      EXPECT_TRUE(bitwise_equal(y[0], ref[0]));
      auto dx = run("max_pool2d_grad", {&x, &y[0], &dy}, w.attrs());
      EXPECT_LE(max_rel_diff(dx[0], ref[1]), 1e-12) << shape_str(s) << " kernel " << w.r << "x" << w.s;
    }
}

TEST(MaxPool2d, NaNPropagatesAndTakesTheGradient) {
  const Window w{2, 2, 2, 2, 0, 0};
  Tensor x = rand64({1, 1, 4, 4}, 5), dy = rand64({1, 1, 2, 2}, 6);
  set(x, 5, std::numeric_limits<double>::quiet_NaN());  // row 1, col 1: the last cell of window (0,0)
  auto y = run("max_pool2d", {&x}, w.attrs());
  EXPECT_TRUE(std::isnan(get(y[0], 0)));
  EXPECT_FALSE(std::isnan(get(y[0], 1)));
  auto dx = run("max_pool2d_grad", {&x, &y[0], &dy}, w.attrs());
  EXPECT_EQ(get(dx[0], 5), get(dy, 0));
  EXPECT_EQ(get(dx[0], 0) + get(dx[0], 1) + get(dx[0], 4), 0.0);
}

TEST(Pooling, BitwiseIdenticalForAnyThreadCount) {
  const Window& w = kWindows[0];
  const Shape s{3, 5, 13, 12};
  const Naive nv(w, s);
  Tensor x = cast(rand64(s, 12), DType::f32), dy = cast(rand64(nv.y_shape(), 13), DType::f32);
  Attrs avg = w.attrs();
  avg["input_hw"] = std::vector<int64_t>{s[2], s[3]};
  auto all = [&] {
    auto y = run("max_pool2d", {&x}, w.attrs());
    auto dx = run("max_pool2d_grad", {&x, &y[0], &dy}, w.attrs());
    auto dxa = run("avg_pool2d_grad", {&dy}, avg);
    y.push_back(std::move(dx[0]));
    y.push_back(std::move(dxa[0]));
    return y;
  };
  expect_bitwise_for_any_thread_count(all);
}

TEST(AvgPool2d, ForwardAndBackwardMatchNaive) {
  for (bool include_pad : {true, false})
    for (const Window& w : kWindows)
      for (const Shape& s : kShapes) {
        const Naive nv(w, s);
        Tensor x = rand64(s, 7), dy = rand64(nv.y_shape(), 8);
        auto ref = naive_avg(nv, x, dy, include_pad);
        Attrs a = w.attrs();
        if (!include_pad) a["count_include_pad"] = false;
        auto y = run("avg_pool2d", {&x}, a);
        EXPECT_LE(max_rel_diff(y[0], ref[0]), 1e-12) << shape_str(s) << " include_pad " << include_pad;
        a["input_hw"] = std::vector<int64_t>{s[2], s[3]};
        auto dx = run("avg_pool2d_grad", {&dy}, a);
        EXPECT_LE(max_rel_diff(dx[0], ref[1]), 1e-12) << shape_str(s) << " include_pad " << include_pad;
      }
}

// ceil_mode windows that overhang the padded input: the extra output row/column, the divisor of
// count_include_pad clipped to the padded input (PyTorch's rule), max and avg both ways.
TEST(Pooling, CeilModeMatchesNaive) {
  const Window windows[] = {{3, 3, 2, 2, 1, 1, true}, {2, 2, 2, 2, 0, 0, true}, {3, 2, 2, 3, 0, 1, true},
                            {3, 3, 2, 2, 0, 0, true}};
  const Shape shapes[] = {{2, 3, 8, 6}, {1, 2, 7, 7}, {2, 1, 6, 9}};
  bool overhang = false;
  for (const Window& w : windows)
    for (const Shape& s : shapes) {
      const Naive nv(w, s);
      Window floor_w = w;
      floor_w.ceil_mode = false;
      overhang |= nv.P > Naive(floor_w, s).P || nv.Q > Naive(floor_w, s).Q;
      Tensor x = rand64(s, 21), dy = rand64(nv.y_shape(), 22);
      auto ref = naive_max(nv, x, dy);
      auto y = run("max_pool2d", {&x}, w.attrs());
      ASSERT_EQ(y[0].shape(), nv.y_shape()) << shape_str(s);
      EXPECT_TRUE(bitwise_equal(y[0], ref[0])) << shape_str(s) << " kernel " << w.r << "x" << w.s;
      auto dx = run("max_pool2d_grad", {&x, &y[0], &dy}, w.attrs());
      EXPECT_LE(max_rel_diff(dx[0], ref[1]), 1e-12) << shape_str(s);
      for (bool include_pad : {true, false}) {
        auto aref = naive_avg(nv, x, dy, include_pad);
        Attrs a = w.attrs();
        a["count_include_pad"] = include_pad;
        auto ya = run("avg_pool2d", {&x}, a);
        EXPECT_LE(max_rel_diff(ya[0], aref[0]), 1e-12) << shape_str(s) << " include_pad " << include_pad;
        a["input_hw"] = std::vector<int64_t>{s[2], s[3]};
        auto dxa = run("avg_pool2d_grad", {&dy}, a);
        EXPECT_LE(max_rel_diff(dxa[0], aref[1]), 1e-12) << shape_str(s) << " include_pad " << include_pad;
      }
    }
  EXPECT_TRUE(overhang) << "no case where ceil_mode adds an output";
}

TEST(Pooling, CeilModeOutputShapesAsPyTorch) {
  // Inception-v3's and torchvision's ceil-mode pools: (input, kernel, stride, padding) -> output.
  struct Case { int64_t in, k, st, pad, out; };
  for (const Case& c : {Case{112, 3, 2, 0, 56}, Case{55, 3, 2, 0, 27}, Case{8, 3, 2, 1, 5}, Case{6, 2, 2, 0, 3},
                        Case{7, 2, 2, 0, 4}, Case{5, 3, 2, 1, 3}}) {
    Tensor x = rand64({1, 1, c.in, c.in}, 3);
    auto y = run("max_pool2d", {&x}, {{"kernel", c.k}, {"stride", c.st}, {"padding", c.pad}, {"ceil_mode", true}});
    EXPECT_EQ(y[0].shape(), (Shape{1, 1, c.out, c.out})) << "in " << c.in << " kernel " << c.k << " stride " << c.st;
  }
}

TEST(AvgPool2d, DefaultsStrideToKernelAndCountsPadding) {
  Tensor x = rand64({2, 3, 6, 6}, 9);
  auto a = run("avg_pool2d", {&x}, {{"kernel", int64_t{3}}, {"padding", int64_t{1}}});
  auto b = run("avg_pool2d", {&x}, {{"kernel", int64_t{3}}, {"stride", int64_t{3}}, {"padding", int64_t{1}},
                                      {"count_include_pad", true}});
  EXPECT_EQ(a[0].shape(), (Shape{2, 3, 2, 2}));
  EXPECT_TRUE(bitwise_equal(a[0], b[0]));
}

TEST(GlobalAvgPool, ForwardAndBackwardMatchNaive) {
  for (const Shape& s : {Shape{2, 3, 5, 6}, Shape{3, 3, 7, 7}, Shape{4, 8, 9, 11}}) {
    Tensor x = rand64(s, 10), dy = rand64({s[0], s[1]}, 11);
    Tensor y_ref(DType::f64, {s[0], s[1]}), dx_ref(DType::f64, s);
    const int64_t hw = s[2] * s[3];
    for (int64_t i = 0; i < s[0] * s[1]; ++i) {
      double sum = 0;
      for (int64_t k = 0; k < hw; ++k) sum += get(x, i * hw + k);
      set(y_ref, i, sum / static_cast<double>(hw));
      for (int64_t k = 0; k < hw; ++k) set(dx_ref, i * hw + k, get(dy, i) / static_cast<double>(hw));
    }
    EXPECT_LE(max_rel_diff(run("global_avg_pool", {&x})[0], y_ref), 1e-12) << shape_str(s);
    auto dx = run("global_avg_pool_grad", {&dy}, {{"input_hw", std::vector<int64_t>{s[2], s[3]}}});
    EXPECT_LE(max_rel_diff(dx[0], dx_ref), 1e-12) << shape_str(s);
  }
}

TEST(Pooling, ErrorsAreClear) {
  Graph g;
  const EntryRef x = g.input("x", {DType::f32, {2, 3, 3, 3}});
  auto msg = error_of([&] { g.add("max_pool2d", {x}, {{"kernel", int64_t{4}}}); });
  EXPECT_NE(msg.find("pooling window [4,4] is larger than the padded input [3,3]"), std::string::npos) << msg;
  msg = error_of([&] { g.add("avg_pool2d", {x}, {{"kernel", std::vector<int64_t>{2, 6}}, {"padding", int64_t{1}}}); });
  EXPECT_NE(msg.find("larger than the padded input [5,5]"), std::string::npos) << msg;
  msg = error_of([&] { g.add("max_pool2d", {x}, {{"kernel", int64_t{2}}, {"padding", int64_t{2}}}); });
  EXPECT_NE(msg.find("padding must be in [0, kernel/2]"), std::string::npos) << msg;
  msg = error_of([&] { g.add("max_pool2d", {x}, {{"stride", int64_t{2}}}); });
  EXPECT_NE(msg.find("missing attribute 'kernel'"), std::string::npos) << msg;
  msg = error_of([&] { g.add("max_pool2d", {x}, {{"kernel", int64_t{2}}, {"stride", int64_t{0}}}); });
  EXPECT_NE(msg.find("stride must be >= 1"), std::string::npos) << msg;
  const EntryRef x3 = g.input("x3", {DType::f32, {2, 3, 3}});
  msg = error_of([&] { g.add("max_pool2d", {x3}, {{"kernel", int64_t{2}}}); });
  EXPECT_NE(msg.find("x must be [N,C,H,W]"), std::string::npos) << msg;
  msg = error_of([&] { g.add("global_avg_pool", {x3}); });
  EXPECT_NE(msg.find("x must be [N,C,H,W]"), std::string::npos) << msg;
  const EntryRef dy = g.input("dy", {DType::f32, {2, 3, 2, 2}});
  msg = error_of([&] { g.add("avg_pool2d_grad", {dy}, {{"kernel", int64_t{2}}, {"input_hw", std::vector<int64_t>{6, 6}}}); });
  EXPECT_NE(msg.find("dy must be float32[2,3,3,3]"), std::string::npos) << msg;
  msg = error_of([&] { g.add("max_pool2d_grad", {x, dy, dy}, {{"kernel", int64_t{2}}}); });
  EXPECT_NE(msg.find("y must be float32[2,3,1,1]"), std::string::npos) << msg;
  msg = error_of([&] { g.add("global_avg_pool_grad", {dy}, {{"input_hw", std::vector<int64_t>{6, 6}}}); });
  EXPECT_NE(msg.find("dy must be [N,C]"), std::string::npos) << msg;
}

}  // namespace
}  // namespace mnemo::test
