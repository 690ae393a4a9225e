// Synthetic data (see synthetic.h).
#include "train/data/synthetic.h"

#include <random>

namespace mnemo {

SyntheticImages::SyntheticImages(Shape sample_shape, int64_t classes, uint64_t seed, double noise)
    : shape_(std::move(sample_shape)), classes_(classes), seed_(seed), noise_(noise) {
  MNEMO_CHECK(classes > 1) << "synthetic data needs at least 2 classes, got " << classes;
  std::mt19937_64 rng(seed);
  std::normal_distribution<double> d(0.0, 1.0);
  const int64_t per = numel(shape_);
  MNEMO_CHECK(per <= kMaxTemplateBytes / static_cast<int64_t>(sizeof(float)) / classes)
      << "synthetic data: " << classes << " classes of shape " << shape_str(shape_) << " need "
      << static_cast<double>(per) * static_cast<double>(classes) * sizeof(float) / (1 << 20)
      << " MiB of class templates; the limit is 1 GiB (lower data.classes or data.shape)";
  templates_.resize(static_cast<size_t>(classes * per));
  for (float& v : templates_) v = static_cast<float>(d(rng));
}

void SyntheticImages::batch(int64_t step, Tensor& data, Tensor& labels) const {
  const int64_t n = labels.numel(), per = numel(shape_);
  MNEMO_CHECK(data.numel() == n * per) << "synthetic batch: data " << data.type().str() << " does not hold " << n
                                       << " samples of " << shape_str(shape_);
  std::mt19937_64 rng(seed_ * 1000003u + static_cast<uint64_t>(step) + 1);
  std::normal_distribution<double> d(0.0, noise_);
  std::uniform_int_distribution<int64_t> cls(0, classes_ - 1);
  for (int64_t i = 0; i < n; ++i) {
    const int64_t k = cls(rng);
    labels.as<int32_t>()[i] = static_cast<int32_t>(k);
    dispatch_float(data.dtype(), "synthetic data", [&]<class T>() {
      T* x = data.as<T>() + i * per;
      for (int64_t j = 0; j < per; ++j) x[j] = static_cast<T>(static_cast<double>(templates_[k * per + j]) + d(rng));
    });
  }
}

}  // namespace mnemo
