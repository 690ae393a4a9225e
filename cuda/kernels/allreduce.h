// The data-parallel gradient mean (cuda/kernels/allreduce.cu), float32; see ops/allreduce.cpp:
//   mean_of_rows: out[i] = (rows[0*stride + i] + rows[1*stride + i] + ... + rows[(ranks-1)*stride + i])
//     / ranks, summed in rank order by one thread per element (the same bits as the CPU kernel).
#pragma once
#include <cuda_runtime_api.h>

#include <cstdint>

namespace mnemo::cuda {

void mean_of_rows(cudaStream_t stream, const float* rows, int64_t ranks, int64_t stride, float* out, int64_t n);

}  // namespace mnemo::cuda
