// Seeded, learnable synthetic classification data: each class has a fixed random template and
// a sample is its class template plus Gaussian noise. Batches are a pure function of (seed, step).
#pragma once
#include "core/tensor.h"

namespace mnemo {

// Class templates of synthetic data are held in memory: at most 1 GiB of them (images keep theirs
// in float32, so 1000 ImageNet-sized classes fit; sequences in float64).
constexpr int64_t kMaxTemplateBytes = int64_t{1} << 30;


class SyntheticImages {
 public:
  SyntheticImages(Shape sample_shape, int64_t classes, uint64_t seed, double noise = 0.5);
  // Fills data[N, sample_shape...] (float) and labels[N] (int32) with batch number `step`.
  void batch(int64_t step, Tensor& data, Tensor& labels) const;

 private:
  Shape shape_;
  int64_t classes_;
  uint64_t seed_;
  double noise_;
  std::vector<float> templates_;  // [classes, numel(sample)]
};

}  // namespace mnemo
