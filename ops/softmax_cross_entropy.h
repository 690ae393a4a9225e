// The softmax cross-entropy's row loss (ops/softmax_cross_entropy.cpp), for code that scores logits
// outside a graph: the evaluator's test loss over the examples of a partial batch.
#pragma once
#include <cstdint>

namespace mnemo::ops {

// The loss of one row of float logits z[0, classes) against `label` (in [0, classes): the caller
// checks it), exactly as softmax_cross_entropy computes each row's: (m - z[label]) + log(sum
// exp(z - m)), m the row's maximum.
float softmax_cross_entropy_row(const float* z, int64_t classes, int32_t label);

}  // namespace mnemo::ops
