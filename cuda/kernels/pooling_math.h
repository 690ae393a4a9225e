// Per-element math of the pooling kernels (cuda/kernels/pooling.cu): plain C++17, callable from host
// and device, so tests/cuda_kernels_math_test.cpp runs the very same functions on the CPU over every
// index and compares them with ops/pooling.cpp. Every function reproduces the CPU op's order of
// operations (window cells in row-major (r, s) order, the CPU's window order for each backward
// accumulation, divisions in double), so float32 results are bitwise those of the CPU kernels.
#pragma once
#include <cstdint>
#include <limits>

#include "cuda/kernels/hd.h"

namespace mnemo::cuda::pool {

// One call's geometry: window r x s, stride (sh, sw), padding (ph, pw), input plane h x w,
// output plane op x oq. (The plain-C++ twin of ops::PoolParams plus the shapes.)
struct Geom {
  int64_t r = 1, s = 1, sh = 1, sw = 1, ph = 0, pw = 0;
  bool count_include_pad = true;
  int64_t h = 0, w = 0, op = 0, oq = 0;
};

// Window rows [r0, r1) of output row pi that lie inside the input; the window's top row is h0.
MNEMO_HD inline void window_rows(const Geom& g, int64_t pi, int64_t& h0, int64_t& r0, int64_t& r1) {
  h0 = pi * g.sh - g.ph;
  r0 = h0 < 0 ? -h0 : 0;
  r1 = g.h - h0 < g.r ? g.h - h0 : g.r;
}
MNEMO_HD inline void window_cols(const Geom& g, int64_t qi, int64_t& w0, int64_t& s0, int64_t& s1) {
  w0 = qi * g.sw - g.pw;
  s0 = w0 < 0 ? -w0 : 0;
  s1 = g.w - w0 < g.s ? g.w - w0 : g.s;
}

// The outputs [o0, o1) along one axis whose window (extent k, stride st, padding pad, `outs`
// outputs) contains input position x: o*st - pad <= x < o*st - pad + k.
MNEMO_HD inline void outputs_containing(int64_t x, int64_t k, int64_t st, int64_t pad, int64_t outs, int64_t& o0,
                                        int64_t& o1) {
  const int64_t lo = x + pad - k + 1, hi = x + pad;  // lo <= o*st <= hi
  o0 = lo <= 0 ? 0 : (lo + st - 1) / st;
  o1 = hi / st + 1;
  if (o1 > outs) o1 = outs;
  if (o1 < o0) o1 = o0;
}

// Divisor of avg pooling output (pi, qi): the window's cells inside the padded input (R*S unless a
// ceil_mode window overhangs it), or the number of input cells in the window.
MNEMO_HD inline double avg_divisor(const Geom& g, int64_t pi, int64_t qi) {
  int64_t h0, r0, r1, w0, s0, s1;
  window_rows(g, pi, h0, r0, r1);
  window_cols(g, qi, w0, s0, s1);
  if (g.count_include_pad) {
    const int64_t he = h0 + g.r < g.h + g.ph ? h0 + g.r : g.h + g.ph;
    const int64_t we = w0 + g.s < g.w + g.pw ? w0 + g.s : g.w + g.pw;
    return static_cast<double>((he - h0) * (we - w0));
  }
  return static_cast<double>((r1 - r0) * (s1 - s0));
}

// max_pool2d output (pi, qi) of plane xp: from -inf, each cell in row-major order replaces the
// running value if it is greater or NaN (the first maximum stays; a NaN wins).
MNEMO_HD inline float max_pool_value(const Geom& g, const float* xp, int64_t pi, int64_t qi) {
  int64_t h0, r0, r1, w0, s0, s1;
  window_rows(g, pi, h0, r0, r1);
  window_cols(g, qi, w0, s0, s1);
  float m = -std::numeric_limits<float>::infinity();
  for (int64_t r = r0; r < r1; ++r)
    for (int64_t s = s0; s < s1; ++s) {
      const float v = xp[(h0 + r) * g.w + w0 + s];
      m = (v > m || v != v) ? v : m;
    }
  return m;
}

// The cell (plane index) of window (pi, qi) that receives dy in max_pool2d_grad: the first cell in
// row-major order equal to yv; if none is (yv NaN, or a y not computed from this x), the first
// maximal cell where the first NaN wins (the CPU's first_max fallback).
MNEMO_HD inline int64_t max_pool_winner(const Geom& g, const float* xp, float yv, int64_t pi, int64_t qi) {
  int64_t h0, r0, r1, w0, s0, s1;
  window_rows(g, pi, h0, r0, r1);
  window_cols(g, qi, w0, s0, s1);
  for (int64_t r = r0; r < r1; ++r)
    for (int64_t s = s0; s < s1; ++s) {
      const int64_t idx = (h0 + r) * g.w + w0 + s;
      if (xp[idx] == yv) return idx;
    }
  int64_t best = -1;
  float bv = 0.0f;
  for (int64_t r = r0; r < r1; ++r)
    for (int64_t s = s0; s < s1; ++s) {
      const int64_t idx = (h0 + r) * g.w + w0 + s;
      const float v = xp[idx];
      if (best < 0 || v > bv || (v != v && bv == bv)) best = idx, bv = v;
    }
  return best;
}

// dx of input cell (hh, ww) of one plane (xp, yp, dyp: the plane's x, y, dy): the sum, from 0 in
// row-major window order, of dy over the windows containing the cell whose winner it is (a gather:
// the CPU op scatters window by window in row-major order, so the additions happen in that order).
MNEMO_HD inline float max_pool_grad_cell(const Geom& g, const float* xp, const float* yp, const float* dyp,
                                         int64_t hh, int64_t ww) {
  int64_t p0, p1, q0, q1;
  outputs_containing(hh, g.r, g.sh, g.ph, g.op, p0, p1);
  outputs_containing(ww, g.s, g.sw, g.pw, g.oq, q0, q1);
  const int64_t self = hh * g.w + ww;
  float acc = 0.0f;
  for (int64_t pi = p0; pi < p1; ++pi)
    for (int64_t qi = q0; qi < q1; ++qi) {
      const int64_t o = pi * g.oq + qi;
      if (max_pool_winner(g, xp, yp[o], pi, qi) == self) acc += dyp[o];
    }
  return acc;
}

// avg_pool2d output (pi, qi): the float sum from 0 of the window's input cells in row-major order,
// divided in double by the divisor and rounded to float.
MNEMO_HD inline float avg_pool_value(const Geom& g, const float* xp, int64_t pi, int64_t qi) {
  int64_t h0, r0, r1, w0, s0, s1;
  window_rows(g, pi, h0, r0, r1);
  window_cols(g, qi, w0, s0, s1);
  float sum = 0.0f;
  for (int64_t r = r0; r < r1; ++r)
    for (int64_t s = s0; s < s1; ++s) sum += xp[(h0 + r) * g.w + w0 + s];
  return static_cast<float>(static_cast<double>(sum) / avg_divisor(g, pi, qi));
}

// The CPU's avg_pool2d_grad walks output columns in blocks of this many (kBlock in ops/pooling.cpp).
constexpr int64_t kCpuColumnBlock = 64;

// dx of input cell (hh, ww) of avg_pool2d_grad: the float sum from 0 of float(dy / divisor) over the
// windows containing the cell, in the order the CPU op scatters them: output rows ascending; within
// a row, column blocks of 64 ascending, and inside a block columns DESCENDING (the CPU loops over
// window columns s outermost, and a larger s reaches the cell from a smaller q).
MNEMO_HD inline float avg_pool_grad_cell(const Geom& g, const float* dyp, int64_t hh, int64_t ww) {
  int64_t p0, p1, q0, q1;
  outputs_containing(hh, g.r, g.sh, g.ph, g.op, p0, p1);
  outputs_containing(ww, g.s, g.sw, g.pw, g.oq, q0, q1);
  float acc = 0.0f;
  for (int64_t pi = p0; pi < p1; ++pi) {
    if (q0 >= q1) break;
    for (int64_t b = q0 / kCpuColumnBlock; b <= (q1 - 1) / kCpuColumnBlock; ++b) {
      const int64_t lo = b * kCpuColumnBlock > q0 ? b * kCpuColumnBlock : q0;
      const int64_t hi = (b + 1) * kCpuColumnBlock < q1 ? (b + 1) * kCpuColumnBlock : q1;
      for (int64_t qi = hi - 1; qi >= lo; --qi)
        acc += static_cast<float>(static_cast<double>(dyp[pi * g.oq + qi]) / avg_divisor(g, pi, qi));
    }
  }
  return acc;
}

// global_avg_pool: the CPU sums a plane of `len` values in double over 16 interleaved lanes (lane k
// holds the elements i = k mod 16, in increasing i) and combines the lanes pairwise (k += k + w for
// w = 8, 4, 2, 1). The device kernel gives each lane to one thread; the host test runs all lanes.
constexpr int kGlobalLanes = 16;

MNEMO_HD inline double global_lane_sum(const float* p, int64_t len, int lane) {
  double a = 0.0;
  for (int64_t i = lane; i < len; i += kGlobalLanes) a += static_cast<double>(p[i]);
  return a;
}
// Combines a[0..16) in place; returns the plane sum (a[0]).
MNEMO_HD inline double global_combine(double* a) {
  for (int w = kGlobalLanes / 2; w > 0; w /= 2)
    for (int k = 0; k < w; ++k) a[k] += a[k + w];
  return a[0];
}
MNEMO_HD inline float global_avg_value(double sum, int64_t len) {
  return static_cast<float>(sum / static_cast<double>(len));
}
MNEMO_HD inline float global_avg_grad_value(float dy, int64_t len) {
  return static_cast<float>(static_cast<double>(dy) / static_cast<double>(len));
}

}  // namespace mnemo::cuda::pool
