// Parameters of the dropout ops (ops/dropout.cpp), shared with their CUDA kernel (cuda/ops_dropout.cpp).
#pragma once
#include <cstdint>

namespace mnemo::ops {

// dropout{p, seed}: drop probability p in [0, 1); seed tells one dropout node's masks from another's.
struct DropoutParams {
  double p = 0.5;
  int64_t seed = 0;
};

}  // namespace mnemo::ops
