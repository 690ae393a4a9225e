// Slicing kernels (cuda/kernels/slice_concat.cu): element copies of any 4- or 8-byte dtype, on
// `stream`. Sizes and strides are in elements of `elem_size` bytes. See slice_concat_math.h.
#pragma once
#include <cuda_runtime_api.h>

#include <cstdint>

namespace mnemo::cuda {

// dst[r * dst_stride + k] = src[r * src_stride + k] for r < rows, k < len (slice, split, concat).
void strided_copy(cudaStream_t stream, void* dst, int64_t dst_stride, const void* src, int64_t src_stride,
                  int64_t rows, int64_t len, int elem_size);
// slice_grad: dx ([outer, extent, inner]) = zeros with dy ([outer, len, inner]) at [begin, begin + len)
// of the middle axis; every element of dx is written.
void slice_grad(cudaStream_t stream, void* dx, const void* dy, int64_t outer, int64_t extent, int64_t inner,
                int64_t begin, int64_t len, int elem_size);

}  // namespace mnemo::cuda
