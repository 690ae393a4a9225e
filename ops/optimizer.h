// Parameters of the optimiser-update ops (ops/optimizer.cpp), shared with the CUDA kernels.
#pragma once

namespace mnemo::ops {

struct SgdParams {
  double lr = 0.1;
  double momentum = 0.9;
  double weight_decay = 0.0;
};

}  // namespace mnemo::ops
