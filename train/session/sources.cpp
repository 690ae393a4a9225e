// The data sources of a config (session.h: make_source, data_shape_of): its files or generators,
// and the training and test splits cut from them.
#include <algorithm>
#include <memory>

#include "train/session/session.h"
#include "train/data/synthetic.h"

namespace mnemo {
namespace {

// Examples [offset, offset + size) of another source: the test split of synthetic data draws
// other examples from the same generator (same class templates).
class OffsetSource : public DataSource {
 public:
  OffsetSource(std::shared_ptr<const DataSource> base, int64_t offset, int64_t size)
      : base_(std::move(base)), offset_(offset), size_(size) {}
  int64_t size() const override { return size_; }
  Shape sample_shape() const override { return base_->sample_shape(); }
  Shape label_shape() const override { return base_->label_shape(); }
  int64_t classes() const override { return base_->classes(); }
  void get(int64_t i, float* data, int32_t* labels) const override { base_->get(offset_ + i, data, labels); }

 private:
  std::shared_ptr<const DataSource> base_;
  int64_t offset_, size_;
};

}  // namespace

std::shared_ptr<const DataSource> make_source(const Config& c, Split split) {
  const DataConfig& d = c.data;
  const uint64_t seed = c.run.seed;
  if (d.source == "fashion-mnist") return std::make_shared<FashionMnist>(d.path, split);
  if (d.source == "fashion-mnist-rows") return std::make_shared<FashionMnistRows>(d.path, split);
  if (d.source == "cifar10") return std::make_shared<Cifar10>(d.path, split);
  if (d.source == "text") {
    // The last tenth of the file's sequences (at least one) is the test split, the rest the
    // training one (the test accuracy was measured on the training text).
    auto all = std::make_shared<TextChars>(d.path, d.steps);
    const int64_t n = all->size(), test = n >= 2 ? std::max<int64_t>(1, n / 10) : 0;
    if (split == Split::train) return std::make_shared<OffsetSource>(all, 0, n - test);
    MNEMO_CHECK(test > 0) << c.file << ": data.path " << d.path << " holds one sequence of " << d.steps
                          << " characters (data.steps), so there is no test split (set data.eval: false)";
    return std::make_shared<OffsetSource>(all, n - test, test);
  }
  const DataShape ds = static_data_shape(c);
  const int64_t all = d.size + d.eval_size;
  std::shared_ptr<const DataSource> gen;
  if (d.source == "synthetic-seq") {
    MNEMO_CHECK(ds.sample.size() == 2) << c.file << ": data.shape of synthetic-seq must be [T, D], got " << shape_str(ds.sample);
    gen = std::make_shared<SyntheticSequences>(ds.sample[0], ds.sample[1], ds.classes, all, seed, c.model_type == "lstm" && c.lstm.per_step);
  } else {
    gen = std::make_shared<SyntheticSource>(ds.sample, ds.classes, all, seed);
  }
  // Train: examples [0, size); test: [size, size + eval_size) of the same generator.
  if (split == Split::train) return std::make_shared<OffsetSource>(gen, 0, d.size);
  MNEMO_CHECK(d.eval_size > 0) << c.file << ": data.eval_size is 0, so there is no test split (set data.eval: false)";
  return std::make_shared<OffsetSource>(gen, d.size, d.eval_size);
}

DataShape data_shape_of(const Config& c, const DataSource& src) {
  return {src.sample_shape(), src.classes(), !src.label_shape().empty()};
}

}  // namespace mnemo
