// Host arithmetic of the cuDNN convolutions (cuda/ops_conv2d.cpp): plain C++, tested on the CPU by
// tests/cuda_kernels_math_test.cpp.
#pragma once
#include <algorithm>
#include <cstdint>

namespace mnemo::cuda::conv {

// Samples per cuDNN launch for a batch of `batch` samples of `per_sample` elements (the larger of x's
// and y's), no launch above `limit` elements: the batch whole when it fits, else cut into the fewest
// launches of equal size (the last smaller when they do not divide the batch). 0: one sample alone
// is above the limit.
inline int64_t launch_batch(int64_t batch, int64_t per_sample, int64_t limit) {
  const int64_t most = limit / std::max<int64_t>(per_sample, 1);
  if (most < 1) return 0;
  if (batch <= most) return batch;
  const int64_t launches = (batch + most - 1) / most;
  return (batch + launches - 1) / launches;
}

}  // namespace mnemo::cuda::conv
