// Index math of the slicing kernels (cuda/kernels/slice_concat.cu): plain C++17, callable from host
// and device, so tests/cuda_kernels_math_test.cpp runs it on the CPU over every index and compares
// the result with ops/slice_concat.cpp. All sizes are in elements (the CPU op copies bytes; every
// row it copies is a whole number of elements).
#pragma once
#include <cstdint>

#include "cuda/kernels/hd.h"

namespace mnemo::cuda::slicing {

// A strided copy of `rows` rows of `len` elements: dst[r * dst_stride + k] = src[r * src_stride + k].
// Element i of the copy (i < rows * len) is row i / len, column i % len. slice, split (one copy per
// piece) and concat (one copy per input) are such copies.
struct Strided {
  int64_t rows = 0, len = 0, dst_stride = 0, src_stride = 0;
};
MNEMO_HD inline void strided_offsets(const Strided& c, int64_t i, int64_t& dst, int64_t& src) {
  const int64_t r = i / c.len, k = i - r * c.len;
  dst = r * c.dst_stride + k;
  src = r * c.src_stride + k;
}

// slice_grad: dx has the input shape seen as [outer, extent, inner]; dy is [outer, len, inner] and
// lands at positions [begin, begin + len) of the axis. Returns dy's element for dx element j, or -1
// where dx is zero.
MNEMO_HD inline int64_t slice_grad_source(int64_t j, int64_t extent, int64_t inner, int64_t begin, int64_t len) {
  const int64_t plane = extent * inner;
  const int64_t o = j / plane, rem = j - o * plane;
  const int64_t a = rem / inner, k = rem - a * inner;
  if (a < begin || a >= begin + len) return -1;
  return (o * len + (a - begin)) * inner + k;
}

}  // namespace mnemo::cuda::slicing
