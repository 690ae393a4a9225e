// conv2d and its backward ops against naive float64 loops (ops/conv2d.cpp, ops/conv2d_grad.cpp):
// every pass on shapes with stride, padding, dilation, non-square kernels and the 1x1 shortcut, in
// float64 (both algorithms) and float32 (oneDNN and im2col); float32 determinism (also with the
// buffers at other addresses); grouped and depthwise convolutions; clear errors for bad shapes.
#include <cmath>
#include <cstring>
#include <sstream>
#include <tuple>

#include "ops/conv2d.h"
#include "test_util.h"

namespace mnemo::test {
namespace {

struct Case {
  int64_t N, C, H, W, K, R, S, sh, sw, ph, pw, dh, dw;
  int64_t G = 1;  // groups: w is [K, C/G, R, S]
  int64_t Cg() const { return C / G; }
  // w's index of (output channel k, input channel ch of k's group, r, s).
  int64_t wi(int64_t k, int64_t ch, int64_t r, int64_t s) const { return ((k * Cg() + ch % Cg()) * R + r) * S + s; }
  int64_t P() const { return (H + 2 * ph - dh * (R - 1) - 1) / sh + 1; }
  int64_t Q() const { return (W + 2 * pw - dw * (S - 1) - 1) / sw + 1; }
};

const std::vector<Case> kCases = {
    {2, 3, 7, 7, 4, 3, 3, 1, 1, 1, 1, 1, 1},     // 3x3 same padding
    {2, 3, 8, 7, 5, 3, 3, 2, 2, 1, 1, 1, 1},     // stride 2, odd width
    {1, 2, 9, 8, 3, 3, 2, 1, 1, 2, 1, 2, 2},     // dilation 2, non-square kernel
    {3, 4, 6, 9, 2, 2, 3, 2, 1, 0, 2, 1, 2},     // mixed stride/padding/dilation
    {2, 4, 5, 6, 3, 1, 1, 1, 1, 0, 0, 1, 1},     // 1x1 pointwise (no im2col)
    {2, 4, 9, 9, 6, 1, 1, 2, 2, 0, 0, 1, 1},     // 1x1 stride 2 (ResNet shortcut)
    {2, 3, 7, 6, 4, 3, 3, 3, 2, 0, 1, 1, 1},     // stride 3: last input rows unused
    {2, 16, 8, 8, 16, 3, 3, 1, 1, 1, 1, 1, 1},   // oneDNN blocked layouts
    {3, 32, 9, 10, 32, 3, 3, 2, 2, 1, 1, 1, 1},  // blocked, stride 2
    {2, 16, 10, 9, 32, 3, 3, 1, 1, 2, 2, 2, 2},  // blocked, dilation 2
    {2, 4, 7, 6, 6, 3, 3, 1, 1, 1, 1, 1, 1, 2},     // 2 groups
    {2, 8, 7, 7, 8, 3, 3, 2, 2, 1, 1, 1, 1, 8},     // depthwise, stride 2 (MobileNet-v2)
    {2, 4, 6, 6, 8, 3, 3, 1, 1, 1, 1, 1, 1, 4},     // depthwise with multiplier 2
    {2, 32, 9, 9, 32, 3, 3, 1, 1, 1, 1, 1, 1, 32},  // depthwise, oneDNN blocked layouts
    {2, 8, 5, 5, 4, 1, 1, 1, 1, 0, 0, 1, 1, 2},     // grouped pointwise (no im2col)
    {1, 6, 8, 7, 6, 1, 7, 1, 1, 0, 3, 1, 1, 3},     // grouped 1x7 (Inception-v3's factorised kernel)
};

// Weights of at least 4 MiB over small activations: oneDNN runs them in parts (ops/conv2d.cpp
// weight_parts). Sums of 1024-3456 float32 products: checked at 1e-4 (the whole convolution,
// with a bias and so in one part, is 5.2e-5 from the float64 loops on the first).
const std::vector<Case> kWeightHeavy = {
    {1, 384, 5, 5, 384, 3, 3, 1, 1, 1, 1, 1, 1},    // 5.3 MB of 3x3 weights
    {1, 1024, 4, 4, 1024, 1, 1, 2, 2, 0, 0, 1, 1},  // 4 MiB of 1x1 weights, stride 2
};

Attrs conv_attrs(const Case& c, const std::string& algo = "auto") {
  Attrs a{{"stride", std::vector<int64_t>{c.sh, c.sw}},
          {"padding", std::vector<int64_t>{c.ph, c.pw}},
          {"dilation", std::vector<int64_t>{c.dh, c.dw}}};
  if (c.G != 1) a["groups"] = c.G;
  if (algo != "auto") a["algo"] = algo;
  return a;
}

// Calls f(n,k,p,q,c,r,s,h,w) for every tap that reads inside the input (c in k's group).
template <class F>
void for_each_tap(const Case& c, F&& f) {
  for (int64_t n = 0; n < c.N; ++n)
    for (int64_t k = 0; k < c.K; ++k)
      for (int64_t p = 0; p < c.P(); ++p)
        for (int64_t q = 0; q < c.Q(); ++q)
          for (int64_t ch = k / (c.K / c.G) * c.Cg(); ch < (k / (c.K / c.G) + 1) * c.Cg(); ++ch)
            for (int64_t r = 0; r < c.R; ++r)
              for (int64_t s = 0; s < c.S; ++s) {
                const int64_t h = p * c.sh - c.ph + r * c.dh, w = q * c.sw - c.pw + s * c.dw;
                if (h >= 0 && h < c.H && w >= 0 && w < c.W) f(n, k, p, q, ch, r, s, h, w);
              }
}

Tensor ref_conv(const Case& c, const Tensor& x, const Tensor& w, const Tensor* b) {
  Tensor y(DType::f64, {c.N, c.K, c.P(), c.Q()});
  double* Y = y.as<double>();
  const double *X = x.as<double>(), *Wt = w.as<double>();
  for (int64_t n = 0; n < c.N; ++n)
    for (int64_t k = 0; k < c.K; ++k)
      for (int64_t i = 0; i < c.P() * c.Q(); ++i) Y[(n * c.K + k) * c.P() * c.Q() + i] = b ? b->as<double>()[k] : 0.0;
  for_each_tap(c, [&](auto n, auto k, auto p, auto q, auto ch, auto r, auto s, auto h, auto ww) {
    Y[((n * c.K + k) * c.P() + p) * c.Q() + q] +=
        Wt[c.wi(k, ch, r, s)] * X[((n * c.C + ch) * c.H + h) * c.W + ww];
  });
  return y;
}

Tensor ref_grad_data(const Case& c, const Tensor& dy, const Tensor& w) {
  Tensor dx(DType::f64, {c.N, c.C, c.H, c.W});
  dx.zero();
  double* DX = dx.as<double>();
  const double *DY = dy.as<double>(), *Wt = w.as<double>();
  for_each_tap(c, [&](auto n, auto k, auto p, auto q, auto ch, auto r, auto s, auto h, auto ww) {
    DX[((n * c.C + ch) * c.H + h) * c.W + ww] +=
        DY[((n * c.K + k) * c.P() + p) * c.Q() + q] * Wt[c.wi(k, ch, r, s)];
  });
  return dx;
}

Tensor ref_grad_weight(const Case& c, const Tensor& dy, const Tensor& x) {
  Tensor dw(DType::f64, {c.K, c.Cg(), c.R, c.S});
  dw.zero();
  double* DW = dw.as<double>();
  const double *DY = dy.as<double>(), *X = x.as<double>();
  for_each_tap(c, [&](auto n, auto k, auto p, auto q, auto ch, auto r, auto s, auto h, auto ww) {
    DW[c.wi(k, ch, r, s)] +=
        DY[((n * c.K + k) * c.P() + p) * c.Q() + q] * X[((n * c.C + ch) * c.H + h) * c.W + ww];
  });
  return dw;
}

Tensor ref_grad_bias(const Case& c, const Tensor& dy) {
  Tensor db(DType::f64, {c.K});
  for (int64_t k = 0; k < c.K; ++k) {
    double s = 0;
    for (int64_t n = 0; n < c.N; ++n)
      for (int64_t i = 0; i < c.P() * c.Q(); ++i) s += dy.as<double>()[(n * c.K + k) * c.P() * c.Q() + i];
    db.as<double>()[k] = s;
  }
  return db;
}

struct Data {
  Tensor x, w, b, dy;
};
Data make_data(const Case& c, uint64_t seed) {
  Data d{Tensor(DType::f64, {c.N, c.C, c.H, c.W}), Tensor(DType::f64, {c.K, c.Cg(), c.R, c.S}),
         Tensor(DType::f64, {c.K}), Tensor(DType::f64, {c.N, c.K, c.P(), c.Q()})};
  fill_distinct(d.x, seed);
  fill_distinct(d.w, seed + 1);
  fill_distinct(d.b, seed + 2);
  fill_distinct(d.dy, seed + 3);
  return d;
}

std::string case_str(const Case& c) {
  std::ostringstream os;
  os << "N" << c.N << " C" << c.C << " " << c.H << "x" << c.W << " K" << c.K << " " << c.R << "x" << c.S << " stride "
     << c.sh << "," << c.sw << " pad " << c.ph << "," << c.pw << " dil " << c.dh << "," << c.dw << " groups " << c.G;
  return os.str();
}

// Tensors are move-only: builds an input list from temporaries.
template <class... Ts>
std::vector<Tensor> list(Ts&&... ts) {
  std::vector<Tensor> v;
  (v.push_back(std::forward<Ts>(ts)), ...);
  return v;
}

// Runs every pass in dtype `dt` with `algo` and compares with the float64 references.
void check_all_passes(DType dt, const std::string& algo, double tol) {
  for (size_t i = 0; i < kCases.size(); ++i) {
    const Case& c = kCases[i];
    SCOPED_TRACE(case_str(c) + " " + dtype_name(dt) + " " + algo);
    const Data d = make_data(c, 100 + 10 * i);
    auto in = [&](const Tensor& t) { return cast(t, dt); };
    auto out = [&](const Tensor& t) { return cast(t, DType::f64); };
    const Attrs a = conv_attrs(c, algo);
    Attrs ad = a, aw = a;
    ad["input_hw"] = std::vector<int64_t>{c.H, c.W};
    aw["kernel"] = std::vector<int64_t>{c.R, c.S};

    EXPECT_LE(max_rel_diff(out(run_op("conv2d", list(in(d.x), in(d.w)), a)[0]), ref_conv(c, d.x, d.w, nullptr)), tol);
    EXPECT_LE(max_rel_diff(out(run_op("conv2d", list(in(d.x), in(d.w), in(d.b)), a)[0]), ref_conv(c, d.x, d.w, &d.b)),
              tol);
    EXPECT_LE(max_rel_diff(out(run_op("conv2d_grad_data", list(in(d.dy), in(d.w)), ad)[0]), ref_grad_data(c, d.dy, d.w)),
              tol);
    EXPECT_LE(
        max_rel_diff(out(run_op("conv2d_grad_weight", list(in(d.dy), in(d.x)), aw)[0]), ref_grad_weight(c, d.dy, d.x)),
        tol);
    EXPECT_LE(max_rel_diff(out(run_op("conv2d_grad_bias", list(in(d.dy)))[0]), ref_grad_bias(c, d.dy)), tol);
  }
}

TEST(Conv2d, Float64MatchesNaiveLoops) { check_all_passes(DType::f64, "auto", 1e-12); }
TEST(Conv2d, Float64Im2colMatchesNaiveLoops) { check_all_passes(DType::f64, "im2col", 1e-12); }
TEST(Conv2d, Float32OnednnMatchesFloat64Reference) { check_all_passes(DType::f32, "auto", 1e-5); }
TEST(Conv2d, Float32Im2colMatchesFloat64Reference) { check_all_passes(DType::f32, "im2col", 1e-5); }
// Winograd (opt-in) where oneDNN has it (3x3 stride 1 cases), direct elsewhere; larger rounding error.
TEST(Conv2d, Float32WinogradMatchesFloat64Reference) { check_all_passes(DType::f32, "winograd", 3e-5); }

std::string input_name(size_t i) {
  std::string name = "x";  // (not "x" + ...: GCC 12 warns falsely, -Wrestrict)
  name += std::to_string(i);
  return name;
}

// Runs op's kernel directly with every input, the output and the workspace placed `offset` bytes
// into larger buffers (other addresses and alignments than a fresh Tensor's).
Tensor run_at_offset(const std::string& op, const std::vector<Tensor>& inputs, const Attrs& attrs, size_t offset) {
  Graph g;
  std::vector<EntryRef> ins;
  for (size_t i = 0; i < inputs.size(); ++i) ins.push_back(g.input(input_name(i), inputs[i].type()));
  const int id = g.add(op, ins, attrs);
  const Node& n = g.node(id);
  std::vector<Tensor> store;
  std::vector<TensorView> in;
  for (const Tensor& t : inputs) {
    store.emplace_back(DType::f32, Shape{static_cast<int64_t>((t.bytes() + offset) / 4 + 1)});
    std::memcpy(static_cast<char*>(store.back().data()) + offset, t.data(), t.bytes());
    in.push_back(TensorView{static_cast<char*>(store.back().data()) + offset, t.type()});
  }
  Tensor out_store(DType::f32, {static_cast<int64_t>((n.outputs[0].bytes() + offset) / 4 + 1)});
  const std::vector<TensorView> out{TensorView{static_cast<char*>(out_store.data()) + offset, n.outputs[0]}};
  const PreparedKernel k = cpu_device().prepare(g, id);  // what the executor runs (oneDNN state included)
  const size_t ws_bytes = k.workspace;
  Tensor ws(DType::f32, {static_cast<int64_t>((ws_bytes + offset) / 4 + 1)});
  k.run(KernelContext{in, out, n.params.get(), static_cast<char*>(ws.data()) + offset, ws_bytes, nullptr, k.state.get()});
  Tensor y(n.outputs[0]);
  std::memcpy(y.data(), out[0].data, y.bytes());
  return y;
}

// Every float32 pass twice through the executor and at three other addresses: identical bits.
void check_deterministic(const Case& c, const std::string& algo) {
  SCOPED_TRACE(case_str(c) + " " + algo);
  const Data d = make_data(c, 7);
  const Tensor x = cast(d.x, DType::f32), w = cast(d.w, DType::f32), b = cast(d.b, DType::f32),
               dy = cast(d.dy, DType::f32);
  Attrs ad = conv_attrs(c, algo), aw = conv_attrs(c, algo);
  ad["input_hw"] = std::vector<int64_t>{c.H, c.W};
  aw["kernel"] = std::vector<int64_t>{c.R, c.S};
  std::vector<std::tuple<std::string, std::vector<Tensor>, Attrs>> passes;
  passes.emplace_back("conv2d", list(clone(x), clone(w), clone(b)), conv_attrs(c, algo));
  passes.emplace_back("conv2d_grad_data", list(clone(dy), clone(w)), ad);
  passes.emplace_back("conv2d_grad_weight", list(clone(dy), clone(x)), aw);
  passes.emplace_back("conv2d_grad_bias", list(clone(dy)), Attrs{});
  for (const auto& [op, inputs, attrs] : passes) {
    const Tensor first = std::move(run_op(op, inputs, attrs)[0]);
    for (int rep = 0; rep < 3; ++rep) EXPECT_TRUE(bitwise_equal(first, run_op(op, inputs, attrs)[0])) << op;
    for (size_t offset : {4, 64, 132})
      EXPECT_TRUE(bitwise_equal(first, run_at_offset(op, inputs, attrs, offset))) << op << " at offset " << offset;
  }
}

TEST(Conv2d, Float32PassesAreDeterministic) {
  for (const Case& c : {Case{8, 32, 12, 12, 32, 3, 3, 1, 1, 1, 1, 1, 1}, Case{6, 16, 11, 9, 24, 3, 3, 2, 2, 1, 1, 2, 1},
                        kCases[3], kWeightHeavy[0]})
    for (const char* algo : {"auto", "winograd", "im2col"}) check_deterministic(c, algo);
}

// A convolution whose weights (>= 4 MiB) outweigh its activations runs in four parts through a
// quarter of the weights' reorder (ops/conv2d.cpp weight_parts): the three passes match the
// float64 loops, and every pass's prepared workspace is under a third of the weights' bytes where
// one buffer of their size was before (determinism: Float32PassesAreDeterministic).
TEST(Conv2d, WeightHeavyConvolutionsRunInParts) {
  if (!ops::conv::onednn_channel_block()) GTEST_SKIP() << "oneDNN reorders no weights on this CPU";
  // Each pass's prepared workspace, and the weights' bytes.
  auto workspaces = [](const Case& c) {
    Attrs ad = conv_attrs(c), aw = conv_attrs(c);
    ad["input_hw"] = std::vector<int64_t>{c.H, c.W};
    aw["kernel"] = std::vector<int64_t>{c.R, c.S};
    const TensorType x{DType::f32, {c.N, c.C, c.H, c.W}}, w{DType::f32, {c.K, c.C, c.R, c.S}}, y{DType::f32, {c.N, c.K, c.P(), c.Q()}};
    std::vector<std::pair<std::string, size_t>> out;
    for (const auto& [op, in, attrs] : {std::tuple{"conv2d", std::vector<TensorType>{x, w}, conv_attrs(c)},
                                        std::tuple{"conv2d_grad_data", std::vector<TensorType>{y, w}, ad},
                                        std::tuple{"conv2d_grad_weight", std::vector<TensorType>{y, x}, aw}}) {
      Graph g;
      std::vector<EntryRef> ins;
      for (size_t k = 0; k < in.size(); ++k) ins.push_back(g.input(input_name(k), in[k]));
      out.emplace_back(op, cpu_device().prepare(g, g.add(op, ins, attrs)).workspace);
    }
    return out;
  };
  for (const Case& c : kWeightHeavy) {
    SCOPED_TRACE(case_str(c));
    const Data d = make_data(c, 300);
    Attrs ad = conv_attrs(c), aw = conv_attrs(c);
    ad["input_hw"] = std::vector<int64_t>{c.H, c.W};
    aw["kernel"] = std::vector<int64_t>{c.R, c.S};
    auto in = [&](const Tensor& t) { return cast(t, DType::f32); };
    auto out = [&](const Tensor& t) { return cast(t, DType::f64); };
    EXPECT_LE(max_rel_diff(out(run_op("conv2d", list(in(d.x), in(d.w)), conv_attrs(c))[0]), ref_conv(c, d.x, d.w, nullptr)), 1e-4);
    EXPECT_LE(max_rel_diff(out(run_op("conv2d_grad_data", list(in(d.dy), in(d.w)), ad)[0]), ref_grad_data(c, d.dy, d.w)), 1e-4);
    EXPECT_LE(max_rel_diff(out(run_op("conv2d_grad_weight", list(in(d.dy), in(d.x)), aw)[0]), ref_grad_weight(c, d.dy, d.x)), 1e-4);
    for (const auto& [op, ws] : workspaces(c)) EXPECT_LT(ws, static_cast<size_t>(c.K * c.C * c.R * c.S * 4 / 3)) << op;
  }
  // Under the 4 MiB floor (2.4 MB of weights over the same tiny activations): one part, the
  // weights reordered whole.
  const Case light{1, 256, 5, 5, 256, 3, 3, 1, 1, 1, 1, 1, 1};
  for (const auto& [op, ws] : workspaces(light)) EXPECT_GE(ws, static_cast<size_t>(light.K * light.C * light.R * light.S * 4)) << op;
}

// Builds conv2d on x and w of the given shapes and returns the error message ("" if none).
std::string conv_error(const std::string& op, const std::vector<TensorType>& in, const Attrs& attrs) {
  Graph g;
  std::vector<EntryRef> ins;
  for (size_t i = 0; i < in.size(); ++i) ins.push_back(g.input(input_name(i), in[i]));
  try {
    g.add(op, ins, attrs, "conv");
  } catch (const Error& e) {
    return e.what();
  }
  return "";
}

// The CPU kernel cache (CpuDevice::prepare) shares a prepared primitive between nodes exactly
// when op, attributes and types are equal: equal nodes get the same state, a node differing in
// one attribute value, an attribute's presence, or an input shape gets its own.
TEST(Conv2d, KernelCacheSharesOnlyEqualNodes) {
  Graph g;
  const EntryRef x = g.input("x", TensorType{DType::f32, {2, 3, 9, 9}});
  const EntryRef x2 = g.input("x2", TensorType{DType::f32, {2, 3, 11, 9}});
  const EntryRef w = g.param("w", TensorType{DType::f32, {4, 3, 3, 3}});
  const Attrs base{{"stride", std::vector<int64_t>{1, 1}}, {"padding", std::vector<int64_t>{1, 1}}};
  Attrs strided = base, dilated = base;
  strided["stride"] = std::vector<int64_t>{2, 1};
  dilated["dilation"] = std::vector<int64_t>{1, 1};  // the default value, but a different attribute set
  const int a = g.add("conv2d", {x, w}, base), b = g.add("conv2d", {x, w}, base);
  const int c = g.add("conv2d", {x, w}, strided), d = g.add("conv2d", {x2, w}, base), e = g.add("conv2d", {x, w}, dilated);
  auto state = [&](int id) { return cpu_device().prepare(g, id).state.get(); };
  ASSERT_NE(state(a), nullptr);
  EXPECT_EQ(state(a), state(b));
  for (int other : {c, d, e}) EXPECT_NE(state(a), state(other)) << g.node(other).name;
  EXPECT_NE(state(c), state(d));
}

TEST(Conv2d, BadShapesAreClearErrors) {
  auto f32 = [](Shape s) { return TensorType{DType::f32, std::move(s)}; };
  const auto contains = [](const std::string& msg, const std::string& part) {
    return msg.find(part) != std::string::npos;
  };
  std::string m = conv_error("conv2d", {f32({2, 3, 8, 8}), f32({4, 5, 3, 3})}, {});
  EXPECT_TRUE(contains(m, "C=3") && contains(m, "expects C=5")) << m;
  m = conv_error("conv2d", {f32({2, 3, 4, 4}), f32({4, 3, 7, 3})}, {{"padding", int64_t{1}}});
  EXPECT_TRUE(contains(m, "larger than the padded input 6x6")) << m;
  m = conv_error("conv2d", {f32({2, 3, 5, 5}), f32({4, 3, 3, 3})}, {{"dilation", int64_t{3}}});
  EXPECT_TRUE(contains(m, "dilated extent 7x7")) << m;
  m = conv_error("conv2d", {f32({2, 3, 8, 8}), f32({4, 3, 3, 3}), f32({3})}, {});
  EXPECT_TRUE(contains(m, "bias must be float32[4]")) << m;
  m = conv_error("conv2d", {f32({3, 8, 8}), f32({4, 3, 3, 3})}, {});
  EXPECT_TRUE(contains(m, "x must be a rank-4")) << m;
  m = conv_error("conv2d", {f32({2, 3, 8, 8}), TensorType{DType::f64, {4, 3, 3, 3}}}, {});
  EXPECT_TRUE(contains(m, "same dtype")) << m;
  m = conv_error("conv2d", {f32({2, 3, 8, 8}), f32({4, 3, 3, 3})}, {{"stride", int64_t{0}}});
  EXPECT_TRUE(contains(m, "stride must be >= 1")) << m;
  m = conv_error("conv2d", {f32({2, 3, 8, 8}), f32({4, 3, 3, 3})}, {{"groups", int64_t{2}}});
  EXPECT_TRUE(contains(m, "groups")) << m;
  m = conv_error("conv2d_grad_data", {f32({2, 4, 6, 6}), f32({4, 3, 3, 3})}, {});
  EXPECT_TRUE(contains(m, "input_hw")) << m;
  m = conv_error("conv2d_grad_data", {f32({2, 4, 6, 6}), f32({4, 3, 3, 3})},
                 {{"input_hw", std::vector<int64_t>{9, 8}}});
  EXPECT_TRUE(contains(m, "gives output 7x6")) << m;
  m = conv_error("conv2d_grad_weight", {f32({2, 4, 6, 6}), f32({3, 3, 8, 8})}, {{"kernel", std::vector<int64_t>{3, 3}}});
  EXPECT_TRUE(contains(m, "different batch sizes")) << m;
  m = conv_error("conv2d_grad_weight", {f32({2, 4, 6, 6}), f32({2, 3, 8, 8})}, {{"kernel", std::vector<int64_t>{3, 2}}});
  EXPECT_TRUE(contains(m, "gives output 6x7")) << m;
  m = conv_error("conv2d", {f32({2, 3, 8, 8}), f32({4, 3, 3, 3})}, {{"algo", std::string("fft")}});
  EXPECT_TRUE(contains(m, "algo must be")) << m;
}

// The gradient graph of a biased conv builds the three backward ops, reading x and w, not y.
TEST(Conv2d, GradReadsInputsNotOutput) {
  Graph g;
  EntryRef x = g.param("x", {DType::f64, {2, 3, 6, 6}}), w = g.param("w", {DType::f64, {4, 3, 3, 3}}),
           b = g.param("b", {DType::f64, {4}});
  EntryRef y = g.add1("conv2d", {x, w, b}, {{"stride", int64_t{2}}, {"padding", int64_t{1}}}, "conv");
  EntryRef dy = g.input("dy", g.type(y));
  const OpDef& def = op_registry().get("conv2d");
  const Node fwd = g.node(y.node);  // a copy: grad adds nodes to g
  GradContext ctx{fwd, {x, w, b}, {y}, {dy}};
  auto grads = def.grad(g, ctx);
  ASSERT_EQ(grads.size(), 3u);
  const std::vector<std::string> ops = {"conv2d_grad_data", "conv2d_grad_weight", "conv2d_grad_bias"};
  const std::vector<EntryRef> fwd_inputs = {x, w, b};
  for (size_t i = 0; i < 3; ++i) {
    ASSERT_TRUE(grads[i].has_value());
    const Node& n = g.node(grads[i]->node);
    EXPECT_EQ(n.op->name, ops[i]);
    EXPECT_EQ(n.outputs[0], g.type(fwd_inputs[i])) << ops[i];
    for (const EntryRef& e : n.inputs) EXPECT_NE(e, y) << ops[i] << " reads y";
  }
}

}  // namespace
}  // namespace mnemo::test
