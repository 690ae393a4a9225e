// Data sources that are not image files (see data.h): characters of a text file, and seeded
// synthetic images and sequences.
#include <fstream>
#include <iterator>
#include <random>

#include "train/config/files.h"
#include "train/data/data.h"

namespace mnemo {

TextChars::TextChars(const std::string& path, int64_t steps) : steps_(steps) {
  MNEMO_CHECK(steps >= 1) << "text data '" << path << "': steps must be at least 1, got " << steps;
  const std::string text = read_small_file(path, "text file", int64_t{1} << 30);  // regular files up to 1 GiB
  const std::vector<uint8_t> bytes(text.begin(), text.end());
  MNEMO_CHECK(!bytes.empty()) << "text file '" << path << "' is empty";
  const auto len = static_cast<int64_t>(bytes.size());
  MNEMO_CHECK(len >= steps + 1) << "text file '" << path << "' has " << len << " characters, too short for one "
                                << "example of steps+1 = " << steps + 1 << " characters";
  bool seen[256] = {};
  for (uint8_t b : bytes) seen[b] = true;
  int id[256] = {};
  for (int c = 0; c < 256; ++c)
    if (seen[c]) {
      id[c] = static_cast<int>(vocab_.size());
      vocab_.push_back(static_cast<char>(c));
    }
  MNEMO_CHECK(vocab_.size() >= 2) << "text file '" << path << "' holds one distinct character ('" << vocab_
                                 << "'): predicting the next one needs at least 2";
  ids_.resize(bytes.size());
  for (size_t i = 0; i < bytes.size(); ++i) ids_[i] = static_cast<uint8_t>(id[bytes[i]]);
  size_ = (len - 1) / steps;
}

void TextChars::get(int64_t index, float* data, int32_t* labels) const {
  MNEMO_CHECK(index >= 0 && index < size_) << "text data: example " << index << " out of range [0," << size_ << ")";
  const int64_t vocab = classes();
  const uint8_t* w = ids_.data() + index * steps_;
  std::fill(data, data + steps_ * vocab, 0.0f);
  for (int64_t t = 0; t < steps_; ++t) {
    data[t * vocab + w[t]] = 1.0f;
    labels[t] = w[t + 1];
  }
}

SyntheticSource::SyntheticSource(Shape sample_shape, int64_t classes, int64_t size, uint64_t seed, double noise)
    : shape_(sample_shape), classes_(classes), size_(size), gen_(std::move(sample_shape), classes, seed, noise) {
  MNEMO_CHECK(size >= 1) << "synthetic data: size must be at least 1, got " << size;
}

void SyntheticSource::get(int64_t index, float* data, int32_t* labels) const {
  MNEMO_CHECK(index >= 0 && index < size_) << "synthetic data: example " << index << " out of range [0," << size_
                                           << ")";
  Shape one = shape_;
  one.insert(one.begin(), 1);
  Tensor x(DType::f32, one), y(DType::i32, {1});
  gen_.batch(index, x, y);
  std::copy(x.as<float>(), x.as<float>() + x.numel(), data);
  labels[0] = y.as<int32_t>()[0];
}

SyntheticSequences::SyntheticSequences(int64_t steps, int64_t features, int64_t classes, int64_t size, uint64_t seed,
                                       bool per_step, double noise)
    : steps_(steps), features_(features), classes_(classes), size_(size), seed_(seed), per_step_(per_step),
      noise_(noise) {
  MNEMO_CHECK(steps >= 1 && features >= 1 && size >= 1)
      << "synthetic sequences: steps, features and size must be positive, got " << steps << ", " << features << ", "
      << size;
  MNEMO_CHECK(classes > 1) << "synthetic sequences need at least 2 classes, got " << classes;
  std::mt19937_64 rng(seed);
  std::normal_distribution<double> d(0.0, 1.0);
  MNEMO_CHECK(features <= kMaxTemplateBytes / static_cast<int64_t>(sizeof(double)) / classes)
      << "synthetic sequences: " << classes << " classes of " << features << " features need more than 1 GiB of "
      << "templates (lower data.classes or data.shape)";
  templates_.resize(static_cast<size_t>(classes * features));
  for (double& v : templates_) v = d(rng);
}

void SyntheticSequences::get(int64_t index, float* data, int32_t* labels) const {
  MNEMO_CHECK(index >= 0 && index < size_) << "synthetic sequences: example " << index << " out of range [0," << size_
                                           << ")";
  std::mt19937_64 rng(mix_seed(seed_, static_cast<uint64_t>(index)));
  std::uniform_int_distribution<int64_t> symbol(0, classes_ - 1);
  std::bernoulli_distribution shows_class(0.5);
  std::normal_distribution<double> d(0.0, noise_);
  const int64_t c = symbol(rng);
  for (int64_t t = 0; t < steps_; ++t) {
    const int64_t s = shows_class(rng) ? c : symbol(rng);
    for (int64_t j = 0; j < features_; ++j)
      data[t * features_ + j] = static_cast<float>(templates_[s * features_ + j] + d(rng));
    if (per_step_) labels[t] = static_cast<int32_t>(c);
  }
  if (!per_step_) labels[0] = static_cast<int32_t>(c);
}

}  // namespace mnemo
