// The fused LSTM cell and its backward (cuda/kernels/lstm_cell.cu), float32, on `stream`. Same
// formulas as ops/lstm_cell.cpp; one thread per (row, k) reads the four gate values before writing
// them, so act may equal gates and dgates may equal act.
#pragma once
#include <cuda_runtime_api.h>

#include <cstdint>

namespace mnemo::cuda {

// gates, gates_h, act: [n, 4h]; c_prev, c, hout: [n, h]. gates_h and c_prev may be null.
void lstm_cell_forward(cudaStream_t stream, const float* gates, const float* gates_h, const float* c_prev, float* hout,
                       float* c, float* act, int64_t n, int64_t h);
// dh, dc, c_prev and dc_prev may be null (absent); dgates: [n, 4h].
void lstm_cell_backward(cudaStream_t stream, const float* act, const float* c, const float* dh, const float* dc,
                        const float* c_prev, float* dgates, float* dc_prev, int64_t n, int64_t h);

}  // namespace mnemo::cuda
