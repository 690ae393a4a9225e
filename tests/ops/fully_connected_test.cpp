// fully_connected and its backward ops against naive float64 loops, with and without bias, at
// sizes that take the multithreaded paths; shape errors.
#include <cstring>

#include "test_util.h"

namespace mnemo::test {
namespace {

// y[n,m] = sum_d x[n,d] w[m,d] + b[m]
Tensor ref_fc(const Tensor& x, const Tensor& w, const Tensor* b) {
  const int64_t N = x.shape()[0], D = x.shape()[1], M = w.shape()[0];
  Tensor y(DType::f64, {N, M});
  for (int64_t n = 0; n < N; ++n)
    for (int64_t m = 0; m < M; ++m) {
      double s = b ? get(*b, m) : 0.0;
      for (int64_t d = 0; d < D; ++d) s += get(x, n * D + d) * get(w, m * D + d);
      set(y, n * M + m, s);
    }
  return y;
}

struct Sizes {
  int64_t n, d, m;
};
const Sizes kSizes[] = {{3, 4, 5}, {1, 7, 2}, {256, 70, 200}};

TEST(FullyConnected, ForwardWithBiasMatchesNaive) {
  for (const Sizes& s : kSizes) {
    Tensor x = rand64({s.n, s.d}, 1), w = rand64({s.m, s.d}, 2), b = rand64({s.m}, 3);
    auto y = run("fully_connected", {&x, &w, &b});
    EXPECT_EQ(y[0].shape(), (Shape{s.n, s.m}));
    EXPECT_LE(max_rel_diff(y[0], ref_fc(x, w, &b)), 1e-12) << s.n << "x" << s.d << "x" << s.m;
  }
}

TEST(FullyConnected, ForwardWithoutBiasMatchesNaive) {
  for (const Sizes& s : kSizes) {
    Tensor x = rand64({s.n, s.d}, 4), w = rand64({s.m, s.d}, 5);
    auto y = run("fully_connected", {&x, &w});
    EXPECT_LE(max_rel_diff(y[0], ref_fc(x, w, nullptr)), 1e-12) << s.n << "x" << s.d << "x" << s.m;
  }
}

TEST(FullyConnected, GradDataMatchesNaive) {  // dx[n,d] = sum_m dy[n,m] w[m,d]
  for (const Sizes& s : kSizes) {
    Tensor dy = rand64({s.n, s.m}, 6), w = rand64({s.m, s.d}, 7);
    Tensor ref(DType::f64, {s.n, s.d});
    for (int64_t n = 0; n < s.n; ++n)
      for (int64_t d = 0; d < s.d; ++d) {
        double acc = 0;
        for (int64_t m = 0; m < s.m; ++m) acc += get(dy, n * s.m + m) * get(w, m * s.d + d);
        set(ref, n * s.d + d, acc);
      }
    EXPECT_LE(max_rel_diff(run("fully_connected_grad_data", {&dy, &w})[0], ref), 1e-12);
  }
}

// float32 (oneDNN's matmul primitive for the forward; dy w from 64 batch rows on MKL's sgemm, or
// oneDNN's matmul primitive, oneDNN's sgemm below; dy^T x, plain and accumulating, MKL's or
// oneDNN's sgemm: which, ops/fully_connected.cpp's use_mkl) against the float64 results, on both
// sides of the 64-row switch; bitwise the same on a second run. ctest runs it again with
// MNEMO_CPU_GEMM=onednn and =mkl in a build with MKL (fully_connected_onednn_gemm, _mkl_gemm).
TEST(FullyConnected, Float32PassesMatchFloat64OnBothSidesOfTheMatmulSwitch) {
  for (const Sizes& s : {Sizes{32, 50, 60}, Sizes{63, 40, 70}, Sizes{64, 40, 70}, Sizes{128, 96, 130}}) {
    Tensor x = rand64({s.n, s.d}, 8), w = rand64({s.m, s.d}, 9), b = rand64({s.m}, 10), dy = rand64({s.n, s.m}, 11);
    Tensor x32 = cast(x, DType::f32), w32 = cast(w, DType::f32), b32 = cast(b, DType::f32), dy32 = cast(dy, DType::f32);
    const std::string what = std::to_string(s.n) + "x" + std::to_string(s.d) + "x" + std::to_string(s.m);
    auto y = run("fully_connected", {&x, &w, &b}), y32 = run("fully_connected", {&x32, &w32, &b32});
    auto dx = run("fully_connected_grad_data", {&dy, &w}), dx32 = run("fully_connected_grad_data", {&dy32, &w32});
    auto dx32b = run("fully_connected_grad_data", {&dy32, &w32});
    const double ey = norm_rel_diff(cast(y32[0], DType::f64), y[0]), ed = norm_rel_diff(cast(dx32[0], DType::f64), dx[0]);
    EXPECT_TRUE(ey <= 1e-6) << "forward " << what << ": " << ey;  // (NaN fails)
    EXPECT_TRUE(ed <= 1e-6) << "dy w " << what << ": " << ed;
    EXPECT_TRUE(bitwise_equal(dx32[0], dx32b[0])) << what;
    Tensor sum = rand64({s.m, s.d}, 12), sum32 = cast(sum, DType::f32);
    auto dw = run("fully_connected_grad_weight", {&dy, &x}), dw32 = run("fully_connected_grad_weight", {&dy32, &x32});
    auto aw = run("fully_connected_grad_weight", {&dy, &x, &sum});
    auto aw32 = run("fully_connected_grad_weight", {&dy32, &x32, &sum32});
    const double ew = norm_rel_diff(cast(dw32[0], DType::f64), dw[0]), ea = norm_rel_diff(cast(aw32[0], DType::f64), aw[0]);
    EXPECT_TRUE(ew <= 1e-6) << "dy^T x " << what << ": " << ew;
    EXPECT_TRUE(ea <= 1e-6) << "sum + dy^T x " << what << ": " << ea;
  }
}

TEST(FullyConnected, GradWeightMatchesNaive) {  // dw[m,d] = sum_n dy[n,m] x[n,d]
  for (const Sizes& s : kSizes) {
    Tensor dy = rand64({s.n, s.m}, 8), x = rand64({s.n, s.d}, 9);
    Tensor ref(DType::f64, {s.m, s.d});
    for (int64_t m = 0; m < s.m; ++m)
      for (int64_t d = 0; d < s.d; ++d) {
        double acc = 0;
        for (int64_t n = 0; n < s.n; ++n) acc += get(dy, n * s.m + m) * get(x, n * s.d + d);
        set(ref, m * s.d + d, acc);
      }
    EXPECT_LE(max_rel_diff(run("fully_connected_grad_weight", {&dy, &x})[0], ref), 1e-12);
  }
}

// dw = sum + dy^T x (the accumulating form the gradient pass uses for weights read at many steps).
TEST(FullyConnected, GradWeightAccumulatesIntoTheSum) {
  for (const Sizes& s : kSizes) {
    Tensor dy = rand64({s.n, s.m}, 21), x = rand64({s.n, s.d}, 22), sum = rand64({s.m, s.d}, 23);
    Tensor ref(DType::f64, {s.m, s.d});
    for (int64_t m = 0; m < s.m; ++m)
      for (int64_t d = 0; d < s.d; ++d) {
        double acc = 0;
        for (int64_t n = 0; n < s.n; ++n) acc += get(dy, n * s.m + m) * get(x, n * s.d + d);
        set(ref, m * s.d + d, get(sum, m * s.d + d) + acc);
      }
    EXPECT_LE(max_rel_diff(run("fully_connected_grad_weight", {&dy, &x, &sum})[0], ref), 1e-12);
  }
}

// In place (the output is the sum's buffer, as the planner puts it) and out of place give the same
// bits, float32 and float64, so every memory mode sums weight gradients identically.
TEST(FullyConnected, GradWeightAccumulatesInPlaceBitwiseAsOutOfPlace) {
  const OpDef* op = op_registry().find("fully_connected_grad_weight");
  ASSERT_NE(op, nullptr);
  EXPECT_EQ(op->accumulates, 2);
  for (DType dt : {DType::f32, DType::f64}) {
    for (const Sizes& s : kSizes) {
      Tensor dy = cast(rand64({s.n, s.m}, 24), dt), x = cast(rand64({s.n, s.d}, 25), dt);
      Tensor sum = cast(rand64({s.m, s.d}, 26), dt);
      Tensor apart(dt, {s.m, s.d}), inplace = clone(sum);
      const TensorView out_apart[] = {apart.view()}, out_inplace[] = {inplace.view()};
      const TensorView in_apart[] = {dy.view(), x.view(), sum.view()}, in_inplace[] = {dy.view(), x.view(), inplace.view()};
      op->cpu(KernelContext{in_apart, out_apart});
      op->cpu(KernelContext{in_inplace, out_inplace});
      ASSERT_EQ(std::memcmp(apart.data(), inplace.data(), apart.bytes()), 0) << dtype_name(dt) << " " << s.n << "x" << s.d << "x" << s.m;
      const std::vector<Tensor> executed = run("fully_connected_grad_weight", {&dy, &x, &sum});  // the executor
      EXPECT_EQ(std::memcmp(apart.data(), executed[0].data(), apart.bytes()), 0) << dtype_name(dt);
    }
  }
}

TEST(FullyConnected, GradWeightRefusesASumOfAnotherShape) {
  Tensor dy = rand64({3, 5}, 1), x = rand64({3, 4}, 2), bad = rand64({4, 5}, 3);
  const std::string e = error_of([&] { run("fully_connected_grad_weight", {&dy, &x, &bad}); });
  EXPECT_NE(e.find("the sum to accumulate into must be float64[5,4]"), std::string::npos) << e;
}

TEST(FullyConnected, GradBiasMatchesNaiveAndIsDeterministic) {  // db[m] = sum_n dy[n,m]
  for (const Sizes& s : kSizes) {
    Tensor dy = rand64({s.n, s.m}, 10);
    Tensor ref(DType::f64, {s.m});
    for (int64_t m = 0; m < s.m; ++m) {
      double acc = 0;
      for (int64_t n = 0; n < s.n; ++n) acc += get(dy, n * s.m + m);
      set(ref, m, acc);
    }
    auto db = run("fully_connected_grad_bias", {&dy});
    EXPECT_LE(max_rel_diff(db[0], ref), 1e-12);
    EXPECT_TRUE(bitwise_equal(db[0], run("fully_connected_grad_bias", {&dy})[0]));
  }
}

// In float32 the bias gradient over many rows keeps float32's precision (a float sum in row
// order drifted: 3.5e-4 relative at 65536 equal rows; PyTorch's float32 is within 3.2e-7).
TEST(FullyConnected, Float32GradBiasKeepsItsPrecisionOverManyRows) {
  for (int64_t cols : {int64_t{1}, int64_t{3}, int64_t{130}}) {  // (one block of columns, and several)
    const int64_t rows = 65536;
    Tensor dy(DType::f32, {rows, cols});
    for (int64_t i = 0; i < dy.numel(); ++i) set(dy, i, 0.1);
    const double want = rows * static_cast<double>(static_cast<float>(0.1));
    const std::vector<Tensor> db = run("fully_connected_grad_bias", {&dy});
    for (int64_t j = 0; j < cols; ++j) EXPECT_LE(std::abs(get(db[0], j) - want) / want, 1e-6) << "column " << j << " of " << cols;
  }
}

TEST(FullyConnected, GradBuildsOneNodePerInput) {
  Graph g;
  EntryRef x = g.param("x", {DType::f32, {3, 4}});
  EntryRef w = g.param("w", {DType::f32, {5, 4}});
  EntryRef b = g.param("b", {DType::f32, {5}});
  const int id = g.add("fully_connected", {x, w, b});
  EXPECT_EQ(g.node(id).outputs[0], (TensorType{DType::f32, {3, 5}}));
  const int no_bias = g.add("fully_connected", {x, w});
  EXPECT_EQ(g.node(no_bias).outputs[0], (TensorType{DType::f32, {3, 5}}));
}

TEST(FullyConnected, ShapeErrorsAreClear) {
  Tensor x = rand64({3, 4}, 1), w = rand64({5, 6}, 2), b = rand64({4}, 3), w_ok = rand64({5, 4}, 4);
  std::string e = error_of([&] { run("fully_connected", {&x, &w}); });
  EXPECT_NE(e.find("must agree on D"), std::string::npos) << e;
  EXPECT_NE(e.find("float64[5,6]"), std::string::npos) << e;
  e = error_of([&] { run("fully_connected", {&x, &w_ok, &b}); });
  EXPECT_NE(e.find("bias must be float64[5]"), std::string::npos) << e;
  Tensor x3 = rand64({2, 3, 4}, 5);
  e = error_of([&] { run("fully_connected", {&x3, &w_ok}); });
  EXPECT_NE(e.find("rank 2"), std::string::npos) << e;
  Tensor x32(DType::f32, {3, 4});
  e = error_of([&] { run("fully_connected", {&x32, &w_ok}); });
  EXPECT_NE(e.find("same dtype"), std::string::npos) << e;
}

}  // namespace
}  // namespace mnemo::test
