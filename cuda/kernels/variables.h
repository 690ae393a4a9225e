// The constant op's fill (cuda/kernels/variables.cu): n words of 4 or 8 bytes set to one bit pattern.
#pragma once
#include <cuda_runtime_api.h>

#include <cstdint>

namespace mnemo::cuda {

void fill_words(cudaStream_t stream, uint32_t* y, int64_t n, uint32_t bits);
void fill_words(cudaStream_t stream, uint64_t* y, int64_t n, uint64_t bits);

}  // namespace mnemo::cuda
