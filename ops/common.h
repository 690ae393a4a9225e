// Shared helpers for op files: Eigen maps, OpenMP loops, inference and cost helpers.
// Included by ops/*.cpp only.
#pragma once
#include <omp.h>

#include <Eigen/Core>
#include <algorithm>
#include <cmath>

#include "core/graph.h"
#include "core/op_registry.h"

namespace mnemo::ops {

template <class T>
using Mat = Eigen::Matrix<T, Eigen::Dynamic, Eigen::Dynamic, Eigen::RowMajor>;
template <class T>
using MatMap = Eigen::Map<Mat<T>, Eigen::Unaligned>;
template <class T>
using ConstMatMap = Eigen::Map<const Mat<T>, Eigen::Unaligned>;
template <class T>
using VecMap = Eigen::Map<Eigen::Matrix<T, Eigen::Dynamic, 1>, Eigen::Unaligned>;
template <class T>
using ConstVecMap = Eigen::Map<const Eigen::Matrix<T, Eigen::Dynamic, 1>, Eigen::Unaligned>;

// Row-major matrix view of a tensor as [rows, numel/rows].
template <class T>
MatMap<T> mat(const TensorView& t, int64_t rows) {
  return MatMap<T>(t.as<T>(), rows, rows ? t.numel() / rows : 0);
}
template <class T>
ConstMatMap<T> cmat(const TensorView& t, int64_t rows) {
  return ConstMatMap<T>(t.as<T>(), rows, rows ? t.numel() / rows : 0);
}

// Elementwise loops below this many elements run on one thread.
constexpr int64_t kParallelGrain = 1 << 15;

// f(begin, end) over [0, n) split into contiguous static chunks, one per thread (deterministic).
template <class F>
void parallel_range(int64_t n, F&& f) {
  if (n < kParallelGrain || omp_get_max_threads() == 1 || omp_in_parallel()) {
    f(int64_t{0}, n);
    return;
  }
#pragma omp parallel
  {
    const int64_t t = omp_get_thread_num(), nt = omp_get_num_threads();
    const int64_t b = n * t / nt, e = n * (t + 1) / nt;
    if (b < e) f(b, e);
  }
}

// f(i) for i in [0, n) over threads; for loops whose iterations are large (channels, images).
template <class F>
void parallel_for(int64_t n, F&& f) {
  if (n <= 1 || omp_get_max_threads() == 1 || omp_in_parallel()) {
    for (int64_t i = 0; i < n; ++i) f(i);
    return;
  }
#pragma omp parallel for schedule(static)
  for (int64_t i = 0; i < n; ++i) f(i);
}

// y[i] = f(x[i]) for i in [0, n), f an Eigen array function (e.g. [](const auto& v) { return
// v.tanh(); }), through Eigen's vectorised (packet) code for every element: each chunk is copied
// into an aligned buffer padded with zeros to a whole number of 64-byte packets, so no element
// takes Eigen's scalar path for unaligned heads or short tails. Each result then depends only on
// its input value, not on the buffer's address, the chunking or the thread count (memory modes and
// orders place buffers differently and must agree bit for bit). y may equal x. (float64 functions
// without a packet version, e.g. tanh, run Eigen's scalar std:: calls: also address-independent.)
template <class T, class F>
void vectorized_map(const T* x, T* y, int64_t n, F&& f) {
  constexpr int64_t kChunk = 512, kPad = 64 / sizeof(T);
  alignas(64) T buf[kChunk];
  using A = Eigen::Array<T, Eigen::Dynamic, 1>;
  for (int64_t b = 0; b < n; b += kChunk) {
    const int64_t m = std::min(kChunk, n - b), padded = (m + kPad - 1) / kPad * kPad;
    std::copy(x + b, x + b + m, buf);
    std::fill(buf + m, buf + padded, T(0));
    Eigen::Map<A, Eigen::Aligned64> v(buf, padded);
    v = f(v);
    std::copy(buf, buf + m, y + b);
  }
}

inline void require_float(const TensorType& t, const char* what) {
  MNEMO_CHECK(is_float(t.dtype)) << what << " must be float32 or float64, got " << t.str();
}
inline void require_same(const TensorType& a, const TensorType& b, const char* what) {
  MNEMO_CHECK(a == b) << what << " must have the same type, got " << a.str() << " and " << b.str();
}

// Channel-blocked activations (ops/layout.cpp): [N,C,d...] stored as [N,C/b,d...,b], channel
// c = cb*b + j at [n, cb, ..., j]; b is oneDNN's nChw8c / nChw16c block.
inline bool is_channel_block(int64_t b) { return b == 8 || b == 16; }
// The `block` attribute of the ops that take such tensors: 0 (plain; not when `required`) or a block.
inline int64_t parse_block_attr(AttrReader& r, bool required = false) {
  const int64_t b = required ? r.require_int("block") : r.get_int("block", 0);
  MNEMO_CHECK((!required && b == 0) || is_channel_block(b))
      << "block must be " << (required ? "" : "0 (plain [N,C,H,W]) or ")
      << "8 or 16 (channel-blocked [N,C/b,H,W,b], oneDNN's nChw8c / nChw16c), got " << b;
  return b;
}
// The blocked shape of a plain one (C a multiple of b), and the plain shape of a blocked one.
inline Shape blocked_shape(Shape plain, int64_t b) {
  plain[1] /= b;
  plain.push_back(b);
  return plain;
}
inline Shape plain_shape(const Shape& blocked) {
  Shape s(blocked.begin(), blocked.end() - 1);
  s[1] *= blocked.back();
  return s;
}

// Inference: one output of the same type as input `i`; every input must have that type (float).
inline InferFn infer_like_input(int i = 0) {
  return [i](const void*, std::span<const TensorType> in) -> std::vector<TensorType> {
    require_float(in[i], "input");
    for (const TensorType& t : in) require_same(in[i], t, "inputs");
    return {in[i]};
  };
}

// Cost: flops_per_element * numel(output 0); bytes = all inputs + outputs.
inline CostFn elementwise_cost(double flops_per_element) {
  return [flops_per_element](const void*, std::span<const TensorType> in, std::span<const TensorType> out) {
    return Cost{flops_per_element * static_cast<double>(out[0].numel()), io_bytes(in, out)};
  };
}

}  // namespace mnemo::ops
