// Parameters of the dropout ops (ops/dropout.cpp), shared with their CUDA kernel (cuda/ops_dropout.cpp).
#pragma once
#include <cstdint>

namespace mnemo::ops {

// dropout{p, seed, offset}: drop probability p in [0, 1); seed tells one dropout node's masks from
// another's; offset: the index of the tensor's first element in the mask's sequence (a
// data-parallel rank's share of the global batch: rank x its elements, so N ranks draw the masks
// one process draws for the whole batch when the batch is the tensor's first dimension).
struct DropoutParams {
  double p = 0.5;
  int64_t seed = 0;
  int64_t offset = 0;
};

}  // namespace mnemo::ops
