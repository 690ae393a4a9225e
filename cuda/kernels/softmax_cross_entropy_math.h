// Per-row math of the softmax cross-entropy kernels (cuda/kernels/softmax_cross_entropy.cu): plain
// C++17, callable from host and device, so tests/cuda_kernels_math_test.cpp runs these functions on
// the CPU and compares them with ops/softmax_cross_entropy.cpp. row_max_sum is the CPU op's serial
// order; the device computes (m, s) with a block tree instead (a different summation order), and
// its expf/logf are CUDA's (within 2 ulp of the host's), so device results agree to rounding.
#pragma once
#include <cmath>
#include <cstdint>
#include <limits>

#include "cuda/kernels/hd.h"

namespace mnemo::cuda::sce {

MNEMO_HD inline float quiet_nan() { return std::numeric_limits<float>::quiet_NaN(); }

// Row maximum m (std::max order: a later element replaces m only when m < it) and
// s = sum_j exp(z[j] - m), summed from 0 in column order.
MNEMO_HD inline void row_max_sum(const float* zn, int64_t cols, float& m, float& s) {
  m = zn[0];
  for (int64_t j = 1; j < cols; ++j) m = (m < zn[j]) ? zn[j] : m;
  s = 0.0f;
  for (int64_t j = 0; j < cols; ++j) s += expf(zn[j] - m);
}

MNEMO_HD inline bool valid_label(int32_t label, int64_t cols) { return label >= 0 && label < cols; }

// The loss of one row: (m - z[label]) + log(s), in the CPU op's order (log(s) + m first rounded
// the loss to m's precision). The CPU op throws on a label outside [0, C); a device kernel cannot,
// so an invalid label gives NaN (which the mean then propagates to the loss).
MNEMO_HD inline float row_loss_from(const float* zn, int64_t cols, int32_t label, float m, float s) {
  if (!valid_label(label, cols)) return quiet_nan();
  return (m - zn[label]) + logf(s);
}
MNEMO_HD inline float row_loss(const float* zn, int64_t cols, int32_t label) {
  float m, s;
  row_max_sum(zn, cols, m, s);
  return row_loss_from(zn, cols, label, m, s);
}

// The loss: the row losses summed from 0 in row order in double, divided by the row count (the
// CPU op's).
MNEMO_HD inline float mean_loss(const float* row_losses, int64_t rows) {
  double total = 0.0;
  for (int64_t n = 0; n < rows; ++n) total += static_cast<double>(row_losses[n]);
  return static_cast<float>(total / static_cast<double>(rows));
}

// linear_cross_entropy's loss: the row losses summed from 0 in row order in double, times scale
// (1 / rows: the CPU op's total * scale).
MNEMO_HD inline float scaled_total(const float* row_losses, int64_t rows, float scale) {
  double total = 0.0;
  for (int64_t n = 0; n < rows; ++n) total += static_cast<double>(row_losses[n]);
  return static_cast<float>(total * static_cast<double>(scale));
}

// dloss / N: the factor of every gradient element.
MNEMO_HD inline float grad_scale(float dloss, int64_t rows) { return dloss / static_cast<float>(rows); }

// dlogits[n, j] from z[n, j], the row's (m, s), its label and the scale; an invalid label gives NaN
// for the whole row (the CPU op throws).
MNEMO_HD inline float grad_value(float z, float m, float s, int32_t label, int64_t j, int64_t cols, float scale) {
  if (!valid_label(label, cols)) return quiet_nan();
  return (expf(z - m) / s - (j == label ? 1.0f : 0.0f)) * scale;
}

}  // namespace mnemo::cuda::sce
