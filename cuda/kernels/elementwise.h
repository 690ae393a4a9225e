// Elementwise arithmetic (cuda/kernels/elementwise.cu), float32, same shapes (no broadcasting, as
// ops/elementwise.cpp), on `stream`. y may equal any input (each thread reads its index of every
// input before writing it).
#pragma once
#include <cuda_runtime_api.h>

#include <cstdint>

namespace mnemo::cuda {

void add(cudaStream_t stream, const float* a, const float* b, float* y, int64_t n);
void mul(cudaStream_t stream, const float* a, const float* b, float* y, int64_t n);
// y = ((x[0] + x[1]) + ...) + x[k-1], summed in input order per element (k >= 1); `x` is a host
// array of k device pointers.
void add_n(cudaStream_t stream, const float* const* x, int k, float* y, int64_t n);

}  // namespace mnemo::cuda
