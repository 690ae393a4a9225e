// Parameters of the batch-norm ops (ops/batch_norm.cpp), shared with the CUDA kernels
// (cuda/ops_batch_norm.cpp).
#pragma once
#include <cstdint>

namespace mnemo::ops {

// batch_norm, batch_norm_grad (defaults), batch_norm_inference_grad (eps; training = false).
struct BatchNormParams {
  double eps = 1e-5;
  bool training = true;
  // 0: x is [N,C] or [N,C,H,W]; 8 or 16: channel-blocked [N,C/b,H,W,b] (ops/layout.cpp), channel
  // c = cb*b + j. CPU only.
  int64_t block = 0;
};

// batch_norm_stats.
struct StatsParams {
  double momentum = 0.1;
  double eps = 1e-5;
  int64_t count = 0;  // values per channel (N*H*W) of the batch the statistics came from
};

}  // namespace mnemo::ops
