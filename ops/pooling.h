// Parameters of the pooling ops (ops/pooling.cpp), shared with the CUDA kernels (cuda/ops_pooling.cpp).
#pragma once
#include <cstdint>

namespace mnemo::ops {

// Window R x S (r, s), stride (sh, sw), zero padding (ph, pw); count_include_pad for avg pooling;
// ceil_mode;
// input_hw (h, w) for the backward ops that cannot see x.
struct PoolParams {
  int64_t r = 1, s = 1, sh = 1, sw = 1, ph = 0, pw = 0;
  bool count_include_pad = true;
  bool ceil_mode = false;  // output size rounded up, as PyTorch's ceil_mode (windows may overhang)
  int64_t h = 0, w = 0;  // input_hw (backward ops that cannot see x)
};

}  // namespace mnemo::ops
