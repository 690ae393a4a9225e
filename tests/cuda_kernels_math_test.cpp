// The host-testable math of mnemo's own CUDA kernels (cuda/kernels/*_math.h: plain C++, the very
// functions the .cu kernels call per element) run on the CPU over every index of small random
// inputs and compared with the CPU ops: pooling and slice/concat/split bitwise, softmax
// cross-entropy bitwise or within 1e-6 relative; the convolutions' launches along the batch. Needs no
// GPU and no CUDA toolkit.
#include <array>
#include <cmath>
#include <cstring>
#include <limits>
#include <random>

#include "cuda/kernels/conv2d_math.h"
#include "cuda/kernels/pooling_math.h"
#include "cuda/kernels/slice_concat_math.h"
#include "cuda/kernels/softmax_cross_entropy_math.h"
#include "test_util.h"

namespace mnemo::test {
namespace {

namespace pool = cuda::pool;
namespace slicing = cuda::slicing;
namespace sce = cuda::sce;

// Uniform floats in [lo, hi).
Tensor uniform(Shape shape, uint64_t seed, float lo = -2.0f, float hi = 2.0f) {
  Tensor t(DType::f32, std::move(shape));
  std::mt19937_64 rng(seed);
  std::uniform_real_distribution<float> d(lo, hi);
  float* p = t.as<float>();
  for (int64_t i = 0; i < t.numel(); ++i) p[i] = d(rng);
  return t;
}

// Few distinct values, both zeros and (optionally) NaNs: many ties in every window.
Tensor ties(Shape shape, uint64_t seed, bool nans) {
  Tensor t(DType::f32, std::move(shape));
  std::mt19937_64 rng(seed);
  const float nan = std::numeric_limits<float>::quiet_NaN();
  const float values[] = {-1.0f, -0.0f, 0.0f, 1.0f, 1.0f, 2.0f, -std::numeric_limits<float>::infinity(), nan};
  const int count = nans ? 8 : 7;
  float* p = t.as<float>();
  for (int64_t i = 0; i < t.numel(); ++i) p[i] = values[rng() % count];
  return t;
}

bool same_bits(const Tensor& a, const Tensor& b) { return bitwise_equal(a, b); }

// ---- pooling ----

struct Window {
  int64_t r, s, sh, sw, ph, pw;
  Attrs attrs(bool ceil_mode = false) const {
    return {{"kernel", std::vector<int64_t>{r, s}}, {"stride", std::vector<int64_t>{sh, sw}},
            {"padding", std::vector<int64_t>{ph, pw}}, {"ceil_mode", ceil_mode}};
  }
};
const Window kWindows[] = {{3, 3, 2, 2, 1, 1}, {2, 2, 2, 2, 0, 0}, {3, 2, 1, 2, 1, 0}, {3, 3, 1, 1, 1, 1},
                           {2, 3, 3, 1, 1, 1}, {1, 1, 2, 2, 0, 0}, {4, 4, 2, 3, 2, 1}};
// The last one has more than 64 output columns (the CPU's column blocks in avg_pool2d_grad).
const Shape kShapes[] = {{2, 3, 5, 6}, {1, 2, 7, 7}, {2, 1, 6, 5}, {1, 1, 4, 9}, {1, 2, 3, 150}};

// PyTorch's pooling_output_shape (ceil_mode: rounded up, but the last window starts inside).
int64_t pooled_extent(int64_t in, int64_t k, int64_t st, int64_t pad, bool ceil_mode) {
  int64_t out = (in + 2 * pad - k + (ceil_mode ? st - 1 : 0)) / st + 1;
  if (ceil_mode && (out - 1) * st >= in + pad) --out;
  return out;
}

pool::Geom geom(const Window& w, bool include_pad, int64_t h, int64_t wd, bool ceil_mode) {
  pool::Geom g;
  g.r = w.r, g.s = w.s, g.sh = w.sh, g.sw = w.sw, g.ph = w.ph, g.pw = w.pw;
  g.count_include_pad = include_pad;
  g.h = h, g.w = wd;
  g.op = pooled_extent(h, w.r, w.sh, w.ph, ceil_mode);
  g.oq = pooled_extent(wd, w.s, w.sw, w.pw, ceil_mode);
  return g;
}

// The device kernels' per-element loops, run on the host.
Tensor host_pool_forward(const pool::Geom& g, const Tensor& x, bool max) {
  const int64_t planes = x.shape()[0] * x.shape()[1];
  Tensor y(DType::f32, {x.shape()[0], x.shape()[1], g.op, g.oq});
  for (int64_t pl = 0; pl < planes; ++pl)
    for (int64_t pi = 0; pi < g.op; ++pi)
      for (int64_t qi = 0; qi < g.oq; ++qi) {
        const float* xp = x.as<float>() + pl * g.h * g.w;
        y.as<float>()[(pl * g.op + pi) * g.oq + qi] =
            max ? pool::max_pool_value(g, xp, pi, qi) : pool::avg_pool_value(g, xp, pi, qi);
      }
  return y;
}

Tensor host_max_backward(const pool::Geom& g, const Tensor& x, const Tensor& y, const Tensor& dy) {
  const int64_t planes = x.shape()[0] * x.shape()[1], hw = g.h * g.w, o = g.op * g.oq;
  Tensor dx(DType::f32, x.shape());
  for (int64_t pl = 0; pl < planes; ++pl)
    for (int64_t hh = 0; hh < g.h; ++hh)
      for (int64_t ww = 0; ww < g.w; ++ww)
        dx.as<float>()[pl * hw + hh * g.w + ww] = pool::max_pool_grad_cell(
            g, x.as<float>() + pl * hw, y.as<float>() + pl * o, dy.as<float>() + pl * o, hh, ww);
  return dx;
}

Tensor host_avg_backward(const pool::Geom& g, const Tensor& dy) {
  const int64_t planes = dy.shape()[0] * dy.shape()[1], hw = g.h * g.w, o = g.op * g.oq;
  Tensor dx(DType::f32, {dy.shape()[0], dy.shape()[1], g.h, g.w});
  for (int64_t pl = 0; pl < planes; ++pl)
    for (int64_t hh = 0; hh < g.h; ++hh)
      for (int64_t ww = 0; ww < g.w; ++ww)
        dx.as<float>()[pl * hw + hh * g.w + ww] = pool::avg_pool_grad_cell(g, dy.as<float>() + pl * o, hh, ww);
  return dx;
}

TEST(CudaKernelsMath, MaxPoolMatchesCpuBitwise) {
  uint64_t seed = 1;
  for (const Window& w : kWindows)
    for (const Shape& xs : kShapes)
      for (int kind = 0; kind < 6; ++kind) {  // random, ties (with zeros of both signs), ties with NaNs; floor, ceil
        if (xs[2] + 2 * w.ph < w.r || xs[3] + 2 * w.pw < w.s) continue;
        const bool ceil_mode = kind >= 3;
        SCOPED_TRACE("window " + std::to_string(w.r) + "x" + std::to_string(w.s) + " stride " +
                     std::to_string(w.sh) + "," + std::to_string(w.sw) + " pad " + std::to_string(w.ph) + "," +
                     std::to_string(w.pw) + " x " + shape_str(xs) + " kind " + std::to_string(kind));
        const Tensor x = kind % 3 == 0 ? uniform(xs, ++seed) : ties(xs, ++seed, kind % 3 == 2);
        const pool::Geom g = geom(w, true, xs[2], xs[3], ceil_mode);
        const Tensor y = std::move(run("max_pool2d", {&x}, w.attrs(ceil_mode))[0]);
        ASSERT_EQ(y.shape(), (Shape{xs[0], xs[1], g.op, g.oq}));
        EXPECT_TRUE(same_bits(host_pool_forward(g, x, true), y));

        const Tensor dy = uniform(y.shape(), ++seed);
        const Tensor dx = std::move(run("max_pool2d_grad", {&x, &y, &dy}, w.attrs(ceil_mode))[0]);
        EXPECT_TRUE(same_bits(host_max_backward(g, x, y, dy), dx));

        // A y that was not computed from x: most windows have no cell equal to y (the fallback).
        const Tensor other = uniform(y.shape(), ++seed);
        const Tensor dx2 = std::move(run("max_pool2d_grad", {&x, &other, &dy}, w.attrs(ceil_mode))[0]);
        EXPECT_TRUE(same_bits(host_max_backward(g, x, other, dy), dx2));
      }
}

TEST(CudaKernelsMath, AvgPoolMatchesCpuBitwise) {
  uint64_t seed = 100;
  for (const Window& w : kWindows)
    for (const Shape& xs : kShapes)
      for (int kind = 0; kind < 4; ++kind) {
        if (xs[2] + 2 * w.ph < w.r || xs[3] + 2 * w.pw < w.s) continue;
        const bool include_pad = kind % 2 == 0, ceil_mode = kind >= 2;
        SCOPED_TRACE("window " + std::to_string(w.r) + "x" + std::to_string(w.s) + " x " + shape_str(xs) +
                     " include_pad " + std::to_string(include_pad) + " ceil_mode " + std::to_string(ceil_mode));
        Attrs a = w.attrs(ceil_mode);
        a["count_include_pad"] = include_pad;
        const Tensor x = uniform(xs, ++seed);
        const pool::Geom g = geom(w, include_pad, xs[2], xs[3], ceil_mode);
        const Tensor y = std::move(run("avg_pool2d", {&x}, a)[0]);
        ASSERT_EQ(y.shape(), (Shape{xs[0], xs[1], g.op, g.oq}));
        EXPECT_TRUE(same_bits(host_pool_forward(g, x, false), y));

        const Tensor dy = uniform(y.shape(), ++seed);
        a["input_hw"] = std::vector<int64_t>{xs[2], xs[3]};
        const Tensor dx = std::move(run("avg_pool2d_grad", {&dy}, a)[0]);
        EXPECT_TRUE(same_bits(host_avg_backward(g, dy), dx));
      }
}

TEST(CudaKernelsMath, GlobalAvgPoolMatchesCpuBitwise) {
  uint64_t seed = 200;
  const Shape shapes[] = {{2, 3, 1, 1}, {2, 2, 3, 5}, {1, 3, 4, 4}, {2, 1, 1, 17}, {3, 2, 7, 7}, {1, 2, 10, 13}};
  for (const Shape& xs : shapes) {
    SCOPED_TRACE("x " + shape_str(xs));
    const Tensor x = uniform(xs, ++seed, -3.0f, 5.0f);
    const int64_t planes = xs[0] * xs[1], hw = xs[2] * xs[3];
    Tensor want(DType::f32, {xs[0], xs[1]});
    for (int64_t pl = 0; pl < planes; ++pl) {
      double lanes[pool::kGlobalLanes];  // one per device thread of the plane's group
      for (int k = 0; k < pool::kGlobalLanes; ++k) lanes[k] = pool::global_lane_sum(x.as<float>() + pl * hw, hw, k);
      want.as<float>()[pl] = pool::global_avg_value(pool::global_combine(lanes), hw);
    }
    EXPECT_TRUE(same_bits(want, run("global_avg_pool", {&x})[0]));

    const Tensor dy = uniform({xs[0], xs[1]}, ++seed);
    Tensor dx(DType::f32, xs);
    for (int64_t i = 0; i < dx.numel(); ++i) dx.as<float>()[i] = pool::global_avg_grad_value(dy.as<float>()[i / hw], hw);
    EXPECT_TRUE(same_bits(dx, run("global_avg_pool_grad", {&dy}, {{"input_hw", std::vector<int64_t>{xs[2], xs[3]}}})[0]));
  }
}

// ---- slice, slice_grad, split, concat ----

struct Layout {
  int64_t outer = 1, extent = 1, inner = 1;
};
Layout layout(const Shape& s, int axis) {
  Layout l;
  for (int i = 0; i < static_cast<int>(s.size()); ++i) {
    if (i < axis) l.outer *= s[i];
    if (i > axis) l.inner *= s[i];
  }
  l.extent = s[axis];
  return l;
}

// The device's strided copy over every element i, in units of the dtype's size.
void host_strided_copy(char* dst, const char* src, const slicing::Strided& c, size_t es) {
  for (int64_t i = 0; i < c.rows * c.len; ++i) {
    int64_t d, s;
    slicing::strided_offsets(c, i, d, s);
    std::memcpy(dst + d * es, src + s * es, es);
  }
}

Tensor random_of(DType dt, Shape shape, uint64_t seed) {
  if (dt == DType::f32) return uniform(std::move(shape), seed);
  Tensor t(dt, std::move(shape));
  if (dt == DType::i32) fill_ints(t, seed, 1000);
  else fill_normal(t, seed);
  return t;
}

const DType kDtypes[] = {DType::f32, DType::i32, DType::f64};
const Shape kSliceShapes[] = {{7}, {3, 5}, {2, 4, 3}, {2, 3, 4, 5}};

TEST(CudaKernelsMath, SliceAndSliceGradMatchCpuBitwise) {
  uint64_t seed = 300;
  for (DType dt : kDtypes)
    for (const Shape& xs : kSliceShapes)
      for (int axis = 0; axis < static_cast<int>(xs.size()); ++axis) {
        const int64_t n = xs[axis];
        for (int64_t b = 0; b < n; ++b)
          for (int64_t e = b + 1; e <= n; ++e) {
            SCOPED_TRACE(std::string(dtype_name(dt)) + " x " + shape_str(xs) + " axis " + std::to_string(axis) +
                         " [" + std::to_string(b) + "," + std::to_string(e) + ")");
            // Negative axis and begin, and a missing end, exercised on alternate cases.
            Attrs a{{"axis", int64_t{(b + e) % 2 ? axis - static_cast<int64_t>(xs.size()) : axis}},
                    {"begin", int64_t{b % 2 ? b - n : b}}};
            if (e < n) a["end"] = int64_t{e % 2 ? e - n : e};
            else if (b % 2) a["end"] = e;  // else no `end`: to the end of the axis
            const Tensor x = random_of(dt, xs, ++seed);
            const Tensor y = std::move(run("slice", {&x}, a)[0]);
            const Layout l = layout(xs, axis);
            const size_t es = dtype_size(dt);
            const int64_t len = e - b;
            Tensor want(dt, y.shape());
            host_strided_copy(static_cast<char*>(want.data()), static_cast<const char*>(x.data()) + b * l.inner * es,
                              {l.outer, len * l.inner, len * l.inner, l.extent * l.inner}, es);
            EXPECT_TRUE(same_bits(want, y));

            const Tensor dy = random_of(dt, y.shape(), ++seed);
            const Tensor dx = std::move(run("slice_grad", {&dy}, {{"axis", int64_t{axis}}, {"begin", b},
                                                                   {"input_shape", xs}})[0]);
            Tensor want_dx(dt, xs);
            for (int64_t j = 0; j < want_dx.numel(); ++j) {
              const int64_t s = slicing::slice_grad_source(j, l.extent, l.inner, b, len);
              char* d = static_cast<char*>(want_dx.data()) + j * es;
              if (s >= 0) std::memcpy(d, static_cast<const char*>(dy.data()) + s * es, es);
              else std::memset(d, 0, es);  // the device writes W(0): all bits zero
            }
            EXPECT_TRUE(same_bits(want_dx, dx));
          }
      }
}

TEST(CudaKernelsMath, SplitAndConcatMatchCpuBitwise) {
  uint64_t seed = 400;
  for (DType dt : kDtypes)
    for (const Shape& xs : kSliceShapes)
      for (int axis = 0; axis < static_cast<int>(xs.size()); ++axis) {
        // Random piece sizes summing to the extent (1 to extent pieces).
        std::mt19937_64 rng(++seed);
        std::vector<int64_t> sizes;
        for (int64_t left = xs[axis]; left > 0;) {
          const int64_t s = 1 + static_cast<int64_t>(rng() % static_cast<uint64_t>(left));
          sizes.push_back(s);
          left -= s;
        }
        SCOPED_TRACE(std::string(dtype_name(dt)) + " x " + shape_str(xs) + " axis " + std::to_string(axis) +
                     " sizes " + shape_str(sizes));
        const Layout l = layout(xs, axis);
        const size_t es = dtype_size(dt);
        const int64_t neg_axis = axis - static_cast<int64_t>(xs.size());

        const Tensor x = random_of(dt, xs, ++seed);
        const std::vector<Tensor> ys = run("split", {&x}, {{"axis", neg_axis}, {"sizes", sizes}});
        ASSERT_EQ(ys.size(), sizes.size());
        int64_t offset = 0;
        for (size_t j = 0; j < sizes.size(); ++j) {
          const int64_t s = sizes[j];
          Tensor want(dt, ys[j].shape());
          host_strided_copy(static_cast<char*>(want.data()),
                            static_cast<const char*>(x.data()) + offset * l.inner * es,
                            {l.outer, s * l.inner, s * l.inner, l.extent * l.inner}, es);
          EXPECT_TRUE(same_bits(want, ys[j])) << "piece " << j;
          offset += s;
        }

        std::vector<Tensor> parts;
        for (size_t j = 0; j < sizes.size(); ++j) {
          Shape ps = xs;
          ps[axis] = sizes[j];
          parts.push_back(random_of(dt, ps, ++seed));
        }
        const Tensor y = std::move(run_op("concat", parts, {{"axis", int64_t{axis}}})[0]);
        Tensor want(dt, xs);
        offset = 0;
        for (size_t j = 0; j < sizes.size(); ++j) {
          const int64_t s = sizes[j];
          host_strided_copy(static_cast<char*>(want.data()) + offset * l.inner * es,
                            static_cast<const char*>(parts[j].data()),
                            {l.outer, s * l.inner, l.extent * l.inner, s * l.inner}, es);
          offset += s;
        }
        EXPECT_TRUE(same_bits(want, y));
      }
}

// ---- softmax cross-entropy ----

Tensor labels_of(int64_t rows, int64_t classes, uint64_t seed) {
  Tensor t(DType::i32, {rows});
  fill_ints(t, seed, classes);
  return t;
}

// |a - b| <= 1e-6 * max(|a|, |b|), or both the same bits.
void expect_close(float a, float b, const std::string& what) {
  if (std::memcmp(&a, &b, sizeof a) == 0) return;
  EXPECT_LE(std::abs(a - b), 1e-6f * std::max(std::abs(a), std::abs(b))) << what << ": " << a << " vs " << b;
}

TEST(CudaKernelsMath, SoftmaxCrossEntropyMatchesCpu) {
  uint64_t seed = 500;
  const std::pair<int64_t, int64_t> shapes[] = {{1, 1}, {1, 7}, {3, 5}, {8, 10}, {17, 3}, {64, 100}};
  for (auto [rows, cols] : shapes)
    for (float scale : {1.0f, 30.0f}) {  // large logits: the row maximum keeps exp finite
      SCOPED_TRACE("logits [" + std::to_string(rows) + "," + std::to_string(cols) + "] scale " +
                   std::to_string(scale));
      const Tensor z = uniform({rows, cols}, ++seed, -scale, scale);
      const Tensor labels = labels_of(rows, cols, ++seed);
      const float* zp = z.as<float>();
      const int32_t* lp = labels.as<int32_t>();

      // Loss: one row per device thread, then the serial mean.
      std::vector<float> row_losses(static_cast<size_t>(rows));
      for (int64_t n = 0; n < rows; ++n) row_losses[n] = sce::row_loss(zp + n * cols, cols, lp[n]);
      const float loss = sce::mean_loss(row_losses.data(), rows);
      const Tensor cpu_loss = std::move(run("softmax_cross_entropy", {&z, &labels})[0]);
      expect_close(loss, cpu_loss.as<float>()[0], "loss");

      // Gradient: the row statistics, then one element per device thread.
      Tensor dloss(DType::f32, {});
      dloss.as<float>()[0] = 0.75f;
      const float sc = sce::grad_scale(dloss.as<float>()[0], rows);
      std::vector<float> stats(static_cast<size_t>(2 * rows));
      for (int64_t n = 0; n < rows; ++n) sce::row_max_sum(zp + n * cols, cols, stats[2 * n], stats[2 * n + 1]);
      const Tensor dz = std::move(run("softmax_cross_entropy_grad", {&z, &labels, &dloss})[0]);
      for (int64_t i = 0; i < rows * cols; ++i) {
        const int64_t n = i / cols, j = i % cols;
        const float g = sce::grad_value(zp[i], stats[2 * n], stats[2 * n + 1], lp[n], j, cols, sc);
        expect_close(g, dz.as<float>()[i], "dlogits[" + std::to_string(i) + "]");
      }
    }
}

// linear_cross_entropy's device steps on the host: the logits (the CPU's fully_connected here; cuBLAS
// on the device), each row's loss and gradient scaled by 1 / rows (lce_rows' functions), the loss
// the row losses' scaled_total and db the gradient's column sums in row order: the CPU op's loss
// and db (the chunks do not change either: db's sums and the losses run in row order).
TEST(CudaKernelsMath, LinearCrossEntropyRowPassMatchesCpu) {
  uint64_t seed = 700;
  for (auto [rows, d, classes] : {std::array<int64_t, 3>{1, 3, 2}, {6, 4, 5}, {33, 8, 17}}) {
    SCOPED_TRACE("x [" + std::to_string(rows) + "," + std::to_string(d) + "], " + std::to_string(classes) + " classes");
    const Tensor x = uniform({rows, d}, ++seed), w = uniform({classes, d}, ++seed), b = uniform({classes}, ++seed);
    const Tensor labels = labels_of(rows, classes, ++seed);
    const Tensor z = std::move(run("fully_connected", {&x, &w, &b})[0]);
    const std::vector<Tensor> cpu = run("linear_cross_entropy", {&x, &w, &b, &labels});
    const float* zp = z.as<float>();
    const int32_t* lp = labels.as<int32_t>();
    const float scale = 1.0f / static_cast<float>(rows);
    std::vector<float> row_losses(static_cast<size_t>(rows)), db(static_cast<size_t>(classes), 0.0f);
    for (int64_t n = 0; n < rows; ++n) {
      float m, s;
      sce::row_max_sum(zp + n * classes, classes, m, s);
      row_losses[n] = sce::row_loss_from(zp + n * classes, classes, lp[n], m, s);
      for (int64_t j = 0; j < classes; ++j) db[j] += sce::grad_value(zp[n * classes + j], m, s, lp[n], j, classes, scale);
    }
    const float loss = sce::scaled_total(row_losses.data(), rows, scale);
    EXPECT_LE(std::abs(loss - cpu[0].as<float>()[0]), 1e-5f * std::max(1.0f, std::abs(loss))) << loss << " vs " << cpu[0].as<float>()[0];
    for (int64_t j = 0; j < classes; ++j) {
      EXPECT_LE(std::abs(db[j] - cpu[3].as<float>()[j]), 1e-5f) << "db[" << j << "]";
    }
  }
}

TEST(CudaKernelsMath, SoftmaxCrossEntropyInvalidLabelIsNan) {
  // The CPU op throws on a label outside [0, C); the device math returns NaN for that row.
  const Tensor z = uniform({2, 4}, 600);
  Tensor labels(DType::i32, {2});
  labels.as<int32_t>()[0] = 1;
  labels.as<int32_t>()[1] = 4;
  EXPECT_NE(error_of([&] { run("softmax_cross_entropy", {&z, &labels}); }), "(no error)");
  const float* zp = z.as<float>();
  EXPECT_FALSE(std::isnan(sce::row_loss(zp, 4, 1)));
  EXPECT_TRUE(std::isnan(sce::row_loss(zp + 4, 4, 4)));
  EXPECT_TRUE(std::isnan(sce::row_loss(zp + 4, 4, -1)));
  float m, s;
  sce::row_max_sum(zp + 4, 4, m, s);
  EXPECT_TRUE(std::isnan(sce::grad_value(zp[4], m, s, 4, 0, 4, 1.0f)));
  EXPECT_FALSE(std::isnan(sce::grad_value(zp[4], m, s, 3, 0, 4, 1.0f)));
}

// A convolution past cuDNN's int range runs as launches along the batch: each launch within the
// limit, the fewest launches, equal ones but the last, every sample covered once.
TEST(CudaKernelsMath, ConvolutionLaunchesCoverTheBatchWithinTheLimit) {
  std::mt19937_64 rng(17);
  for (int t = 0; t < 20000; ++t) {
    const int64_t batch = 1 + static_cast<int64_t>(rng() % 5000), per = 1 + static_cast<int64_t>(rng() % 3000);
    const int64_t limit = per / 2 + static_cast<int64_t>(rng() % (per * 40));
    const int64_t chunk = cuda::conv::launch_batch(batch, per, limit);
    if (per > limit) {
      EXPECT_EQ(chunk, 0) << "one sample above the limit";
      continue;
    }
    ASSERT_GE(chunk, 1);
    ASSERT_LE(chunk, batch);
    EXPECT_LE(chunk * per, limit) << batch << " x " << per << " within " << limit;
    const int64_t launches = (batch + chunk - 1) / chunk, fewest = (batch + limit / per - 1) / (limit / per);
    EXPECT_EQ(launches, fewest) << batch << " x " << per << " within " << limit;
    const int64_t last = batch - (launches - 1) * chunk;
    EXPECT_GE(last, 1);
    EXPECT_LE(last, chunk);
    if (batch * per <= limit) { EXPECT_EQ(chunk, batch) << "a batch within the limit is one launch"; }
  }
  // The GPU cases: the test's [524589, 1, 64, 64] and ResNet-50's stem output [2800, 64, 112, 112].
  EXPECT_EQ(cuda::conv::launch_batch(524589, 64 * 64, INT32_MAX), 262295);
  EXPECT_EQ(cuda::conv::launch_batch(2800, 64 * 112 * 112, INT32_MAX), 1400);
  EXPECT_EQ(cuda::conv::launch_batch(2674, 64 * 112 * 112, INT32_MAX), 2674);
  EXPECT_EQ(cuda::conv::launch_batch(1, int64_t{INT32_MAX} + 1, INT32_MAX), 0);
}

}  // namespace
}  // namespace mnemo::test
