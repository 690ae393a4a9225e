// Pointwise activations and their backward ops (cuda/kernels/activations.cu), float32, on `stream`.
// Same functions as ops/activations.cpp; y may equal x and dx may equal dy (each thread reads only
// its own index before writing it).
#pragma once
#include <cuda_runtime_api.h>

#include <cstdint>

namespace mnemo::cuda {

enum class Activation { relu, sigmoid, tanh };

// y = f(x) over n elements.
void activation_forward(cudaStream_t stream, Activation a, const float* x, float* y, int64_t n);
// dx = f'(y, dy) over n elements (from the forward output y).
void activation_backward(cudaStream_t stream, Activation a, const float* y, const float* dy, float* dx, int64_t n);
// clip: y = min(max(x, lo), hi) (NaN propagates); clip_grad: dx = (y <= lo || y >= hi) ? 0 : dy.
void clip_forward(cudaStream_t stream, const float* x, float* y, int64_t n, float lo, float hi);
void clip_backward(cudaStream_t stream, const float* y, const float* dy, float* dx, int64_t n, float lo, float hi);

}  // namespace mnemo::cuda
