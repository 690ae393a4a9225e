// Parameters of the optimiser-update ops (ops/optimizer.cpp), shared with the CUDA kernels.
#pragma once
#include <cstdint>

namespace mnemo::ops {

// sgd_update's attributes; the learning rate is an input (bound each step), not an attribute,
// so a captured step replays with the current one.
struct SgdParams {
  double momentum = 0.9;
  double weight_decay = 0.0;
  int64_t index = 1;  // the status this update reports when its gradient is not finite (>= 1)
};

}  // namespace mnemo::ops
