// Own kernels of the fully_connected family (cuda/kernels/fully_connected.cu); the GEMMs run
// through cuBLAS from cuda/ops_fully_connected.cpp. Row-major y[N,M], b[M].
#pragma once
#include <cuda_runtime_api.h>

#include <cstdint>

namespace mnemo::cuda {

// y[n, j] += b[j] (float, as the CPU's bias pass after the GEMM).
void fc_bias_add(cudaStream_t stream, float* y, const float* b, int64_t N, int64_t M);
// db[j] = sum over n of dy[n, j] (added to db[j] when `accumulate`): one thread per column, float,
// rows in order from 0 (from db[j]) — the CPU op's exact sequence of additions, so the result is
// bitwise the CPU's.
void fc_bias_grad(cudaStream_t stream, const float* dy, float* db, int64_t N, int64_t M, bool accumulate = false);

}  // namespace mnemo::cuda
