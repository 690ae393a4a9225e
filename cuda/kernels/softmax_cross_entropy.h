// Softmax cross-entropy kernels (cuda/kernels/softmax_cross_entropy.cu), float32 logits [rows, cols],
// int32 labels [rows], on `stream`. See softmax_cross_entropy_math.h for the per-row math.
#pragma once
#include <cuda_runtime_api.h>

#include <cstdint>

namespace mnemo::cuda {

// Workspace floats each kernel needs (the caller plans them; no allocation here).
inline int64_t sce_loss_workspace_floats(int64_t rows) { return rows; }      // per-row losses
inline int64_t sce_grad_workspace_floats(int64_t rows) { return 2 * rows; }  // per-row (max, sum)

// loss[0] = mean over rows of the row losses (a label outside [0, cols) makes the loss NaN).
void sce_loss(cudaStream_t stream, const float* z, const int32_t* labels, float* loss, int64_t rows, int64_t cols,
              float* workspace);
// dz = (softmax(z) - onehot(labels)) * dloss[0] / rows; dz may equal z (the per-row max and sum are
// computed by a first kernel before a second one writes dz). Rows with an invalid label become NaN.
void sce_grad(cudaStream_t stream, const float* z, const int32_t* labels, const float* dloss, float* dz, int64_t rows,
              int64_t cols, float* workspace);

// linear_cross_entropy (cuda/ops_fully_connected.cpp), the steps that are not GEMMs:
// lce_rows, over a chunk of logits z[rows, cols] with the bias added: row_losses[n] = the row's
// loss, then z = (softmax(z) - onehot(labels)) * scale in place (stats: 2 * rows floats of
// workspace, the rows' max and sum); lce_total: loss[0] = the row losses summed in row order,
// times scale (sce::scaled_total); scale_by: y = x * s[0] elementwise (y may be x), the saved
// gradients times dloss in linear_cross_entropy_grad.
void lce_rows(cudaStream_t stream, float* z, const int32_t* labels, float* row_losses, float* stats, int64_t rows,
              int64_t cols, float scale);
void lce_total(cudaStream_t stream, const float* row_losses, float* loss, int64_t rows, float scale);
void scale_by(cudaStream_t stream, const float* x, const float* s, float* y, int64_t n);

}  // namespace mnemo::cuda
