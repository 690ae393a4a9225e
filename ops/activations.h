// Parameters of the clip op (ops/activations.cpp), shared with its CUDA kernel (cuda/ops_activations.cpp).
#pragma once

namespace mnemo::ops {

// clip{min, max}: y = min(max(x, lo), hi).
struct ClipParams {
  double lo = 0, hi = 6;
};

}  // namespace mnemo::ops
