// Slicing kernels (see slice_concat.h): one thread per destination element, index math from
// slice_concat_math.h (tested on the CPU against ops/slice_concat.cpp).
#include "cuda/kernels/common.cuh"
#include "cuda/kernels/slice_concat.h"
#include "cuda/kernels/slice_concat_math.h"

namespace mnemo::cuda {
namespace {

template <class W>
__global__ void strided_copy_kernel(W* dst, const W* src, slicing::Strided c, int64_t n) {
  MNEMO_GRID_LOOP(i, n) {
    int64_t d, s;
    slicing::strided_offsets(c, i, d, s);
    dst[d] = src[s];
  }
}

template <class W>
__global__ void slice_grad_kernel(W* dx, const W* dy, int64_t n, int64_t extent, int64_t inner, int64_t begin,
                                  int64_t len) {
  MNEMO_GRID_LOOP(j, n) {
    const int64_t s = slicing::slice_grad_source(j, extent, inner, begin, len);
    dx[j] = s >= 0 ? dy[s] : W(0);
  }
}

template <class W>
void copy_words(cudaStream_t stream, void* dst, const void* src, const slicing::Strided& c) {
  const int64_t n = c.rows * c.len;
  strided_copy_kernel<W><<<blocks_for(n), kThreads, 0, stream>>>(static_cast<W*>(dst), static_cast<const W*>(src), c, n);
  MNEMO_CUDA_LAUNCHED();
}

template <class W>
void slice_grad_words(cudaStream_t stream, void* dx, const void* dy, int64_t outer, int64_t extent, int64_t inner,
                      int64_t begin, int64_t len) {
  const int64_t n = outer * extent * inner;
  slice_grad_kernel<W><<<blocks_for(n), kThreads, 0, stream>>>(static_cast<W*>(dx), static_cast<const W*>(dy), n,
                                                              extent, inner, begin, len);
  MNEMO_CUDA_LAUNCHED();
}

void check_elem_size(int elem_size) {
  MNEMO_CHECK(elem_size == 4 || elem_size == 8) << "slicing kernels copy 4- or 8-byte elements, got " << elem_size;
}

}  // namespace

void strided_copy(cudaStream_t stream, void* dst, int64_t dst_stride, const void* src, int64_t src_stride,
                  int64_t rows, int64_t len, int elem_size) {
  check_elem_size(elem_size);
  if (rows <= 0 || len <= 0) return;
  const slicing::Strided c{rows, len, dst_stride, src_stride};
  if (elem_size == 4) copy_words<uint32_t>(stream, dst, src, c);
  else copy_words<uint64_t>(stream, dst, src, c);
}

void slice_grad(cudaStream_t stream, void* dx, const void* dy, int64_t outer, int64_t extent, int64_t inner,
                int64_t begin, int64_t len, int elem_size) {
  check_elem_size(elem_size);
  if (outer <= 0 || extent <= 0 || inner <= 0) return;
  if (elem_size == 4) slice_grad_words<uint32_t>(stream, dx, dy, outer, extent, inner, begin, len);
  else slice_grad_words<uint64_t>(stream, dx, dy, outer, extent, inner, begin, len);
}

}  // namespace mnemo::cuda
