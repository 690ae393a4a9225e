// Parameters of the variable ops (ops/variables.cpp: input, param, constant), shared with the CUDA
// kernels (cuda/ops_variables.cpp).
#pragma once
#include "core/tensor.h"

namespace mnemo::ops {

struct VariableParams {
  TensorType type;
  bool trainable = true;
  double value = 0;  // constant: the fill value
};

}  // namespace mnemo::ops
