// Fill kernels for the constant op (see variables.h).
#include "cuda/kernels/common.cuh"
#include "cuda/kernels/variables.h"

namespace mnemo::cuda {
namespace {

template <class W>
__global__ void fill_words_kernel(W* y, int64_t n, W bits) {
  MNEMO_GRID_LOOP(i, n) y[i] = bits;
}

template <class W>
void launch(cudaStream_t stream, W* y, int64_t n, W bits) {
  if (n <= 0) return;
  fill_words_kernel<W><<<blocks_for(n), kThreads, 0, stream>>>(y, n, bits);
  MNEMO_CUDA_LAUNCHED();
}

}  // namespace

void fill_words(cudaStream_t stream, uint32_t* y, int64_t n, uint32_t bits) { launch(stream, y, n, bits); }
void fill_words(cudaStream_t stream, uint64_t* y, int64_t n, uint64_t bits) { launch(stream, y, n, bits); }

}  // namespace mnemo::cuda
