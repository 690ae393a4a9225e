// Training data: finite indexable example sets (DataSource) and the batch loader that feeds the
// training loop. Sources read real files (Fashion-MNIST idx.gz, CIFAR-10 binary batches, any
// text file) or generate seeded synthetic examples; the loader shuffles per epoch, prepares the
// next batches on a background thread while the caller computes, and can seek to any batch so a
// resumed run continues bit-identically. Shape letters: N batch, C channels, H/W height/width,
// T time steps, D features (see core/shape.h).
#pragma once
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <exception>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "core/tensor.h"
#include "train/data/synthetic.h"

namespace mnemo {

// A finite, immutable set of examples. Every example has data of sample_shape() (float32) and
// labels of label_shape() (int32 class ids in [0, classes())).
class DataSource {
 public:
  virtual ~DataSource() = default;
  virtual int64_t size() const = 0;
  // Per-example data shape: {C,H,W} for images, {T,D} for sequences.
  virtual Shape sample_shape() const = 0;
  // {} for one class per example, {T} for one class per time step.
  virtual Shape label_shape() const = 0;
  virtual int64_t classes() const = 0;
  // Fills example `index` in [0, size()): numel(sample_shape()) floats into data and
  // numel(label_shape()) ints into labels. Thread-safe (sources are immutable once built).
  virtual void get(int64_t index, float* data, int32_t* labels) const = 0;
};

// splitmix64 (Steele, Lea, Flood 2014): advances `state` and returns the next 64-bit value. Used
// to derive seeds (epoch permutations, synthetic examples) so they are the same on every platform.
inline uint64_t splitmix64(uint64_t& state) {
  uint64_t z = (state += 0x9e3779b97f4a7c15ull);
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
  return z ^ (z >> 31);
}
// A seed derived from two values: splitmix64 of a, then of that mixed with b.
inline uint64_t mix_seed(uint64_t a, uint64_t b) {
  uint64_t s = a;
  s = splitmix64(s) ^ b;
  return splitmix64(s);
}

enum class Split { train, test };
Split parse_split(const std::string& name);  // "train" or "test"
const char* split_name(Split s);

// Fashion-MNIST from the idx files in `dir` (train-images-idx3-ubyte.gz, train-labels-idx1-ubyte.gz,
// t10k-*; an uncompressed file of the same name without ".gz" is read when the .gz is absent).
// Images {1,28,28}, pixels p/255 normalised as (x - 0.2860) / 0.3530; labels {} in [0,10).
// The whole split is read (and every header, count and label checked) in the constructor.
class FashionMnist : public DataSource {
 public:
  static constexpr const char* kDefaultDir = "/usr/share/datasets/fashion-mnist";
  static constexpr int64_t kRows = 28, kCols = 28, kClasses = 10;
  FashionMnist(const std::string& dir, Split split);
  int64_t size() const override { return static_cast<int64_t>(labels_.size()); }
  Shape sample_shape() const override { return {1, kRows, kCols}; }
  Shape label_shape() const override { return {}; }
  int64_t classes() const override { return kClasses; }
  void get(int64_t index, float* data, int32_t* labels) const override;

 private:
  std::vector<uint8_t> pixels_;  // [size, 28, 28]
  std::vector<uint8_t> labels_;  // [size]
  float lut_[256];               // normalised value of each pixel byte
};

// Fashion-MNIST as sequences for recurrent models: 28 steps of 28-pixel rows, sample {28,28},
// one class per sequence (labels {}). Same files and normalisation as FashionMnist.
class FashionMnistRows : public DataSource {
 public:
  FashionMnistRows(const std::string& dir, Split split) : images_(dir, split) {}
  int64_t size() const override { return images_.size(); }
  Shape sample_shape() const override { return {FashionMnist::kRows, FashionMnist::kCols}; }
  Shape label_shape() const override { return {}; }
  int64_t classes() const override { return FashionMnist::kClasses; }
  void get(int64_t index, float* data, int32_t* labels) const override { images_.get(index, data, labels); }

 private:
  FashionMnist images_;
};

// CIFAR-10 binary batches in `dir`: data_batch_1.bin .. data_batch_5.bin (train) or test_batch.bin
// (test); each record is 1 label byte then 3072 pixel bytes (1024 R, 1024 G, 1024 B, rows of 32).
// Images {3,32,32}, per-channel (p/255 - mean) / std with mean (0.4914,0.4822,0.4465) and std
// (0.2470,0.2435,0.2616); labels {} in [0,10). Files of any whole number of records are accepted.
class Cifar10 : public DataSource {
 public:
  static constexpr int64_t kChannels = 3, kSide = 32, kClasses = 10;
  static constexpr int64_t kPixels = kChannels * kSide * kSide, kRecord = 1 + kPixels;
  Cifar10(const std::string& dir, Split split);
  int64_t size() const override { return static_cast<int64_t>(labels_.size()); }
  Shape sample_shape() const override { return {kChannels, kSide, kSide}; }
  Shape label_shape() const override { return {}; }
  int64_t classes() const override { return kClasses; }
  void get(int64_t index, float* data, int32_t* labels) const override;

 private:
  std::vector<uint8_t> pixels_;  // [size, 3, 32, 32]
  std::vector<uint8_t> labels_;  // [size]
  float lut_[kChannels][256];
};

// Next-character prediction on the bytes of a text file. The vocabulary is the sorted set of
// distinct bytes; example i is the window of steps+1 characters starting at i*steps (inputs of
// consecutive windows do not overlap; each character is a target once). Data {steps, vocab}
// one-hot of characters [0, steps); labels {steps} = ids of characters [1, steps].
class TextChars : public DataSource {
 public:
  TextChars(const std::string& path, int64_t steps);
  int64_t size() const override { return size_; }
  Shape sample_shape() const override { return {steps_, classes()}; }
  Shape label_shape() const override { return {steps_}; }
  int64_t classes() const override { return static_cast<int64_t>(vocab_.size()); }
  void get(int64_t index, float* data, int32_t* labels) const override;
  const std::string& vocab() const { return vocab_; }  // vocab()[id] is the character of class id

 private:
  int64_t steps_, size_;
  std::string vocab_;
  std::vector<uint8_t> ids_;  // the file as vocabulary ids
};

// SyntheticImages (train/data/synthetic.h) as a fixed set of `size` examples: example i is batch i of
// the generator with one sample. Seeded and learnable (class template plus Gaussian noise).
class SyntheticSource : public DataSource {
 public:
  SyntheticSource(Shape sample_shape, int64_t classes, int64_t size, uint64_t seed, double noise = 0.5);
  int64_t size() const override { return size_; }
  Shape sample_shape() const override { return shape_; }
  Shape label_shape() const override { return {}; }
  int64_t classes() const override { return classes_; }
  void get(int64_t index, float* data, int32_t* labels) const override;

 private:
  Shape shape_;
  int64_t classes_, size_;
  SyntheticImages gen_;
};

// Seeded learnable sequences for recurrent models: data {T,D}, labels {T} (per_step) or {}.
// Example i draws a class c; each step shows symbol s_t = c with probability 1/2, else a uniform
// random symbol, as x_t = template[s_t] + noise * N(0,1) (one fixed random D-vector per symbol).
// The label is c (at every step when per_step): evidence for c accumulates along the sequence.
class SyntheticSequences : public DataSource {
 public:
  SyntheticSequences(int64_t steps, int64_t features, int64_t classes, int64_t size, uint64_t seed,
                     bool per_step, double noise = 0.5);
  int64_t size() const override { return size_; }
  Shape sample_shape() const override { return {steps_, features_}; }
  Shape label_shape() const override { return per_step_ ? Shape{steps_} : Shape{}; }
  int64_t classes() const override { return classes_; }
  void get(int64_t index, float* data, int32_t* labels) const override;

 private:
  int64_t steps_, features_, classes_, size_;
  uint64_t seed_;
  bool per_step_;
  double noise_;
  std::vector<double> templates_;  // [classes, D]
};

// Batch tensors for `n` examples of `src`: data float32 [N, sample...] and labels int32
// [N, label...]; time_major (sample {T,D} only): data [T,N,D], labels [T,N] or [N].
TensorType batch_data_type(const DataSource& src, int64_t n, bool time_major);
TensorType batch_label_type(const DataSource& src, int64_t n, bool time_major);
// Fills one batch with examples indices[0..count) (count <= N of the tensors, which must have the
// types above); slots [count, N) are zero-filled (data 0, label 0).
void fill_batch(const DataSource& src, const int64_t* indices, int64_t count, bool time_major, Tensor& data,
                Tensor& labels);

// Endless training batches over a source. Batch `p` (p = 0, 1, ... counted over all epochs) is
// batch p % batches_per_epoch() of epoch p / batches_per_epoch(); an epoch is the source in the
// order of a permutation (identity without shuffle) cut into batches of `batch`, dropping the last
// incomplete one. The permutation of epoch e is a Fisher-Yates shuffle driven by splitmix64 seeded
// with mix(seed, e), so batches are a pure function of (source, batch, shuffle, seed, p): the same
// on every run and every platform. A background thread prepares the next batch ahead. One
// consumer thread calls next()/seek(); position() and epoch() may be read from any thread.
class BatchLoader {
 public:
  // With `ranks` > 1 (data parallelism) the epoch is cut into global batches of batch * ranks and
  // this loader yields part `rank` of each (examples [rank * batch, (rank + 1) * batch) of it):
  // the ranks together see exactly the batches one process with batch * ranks would.
  BatchLoader(std::shared_ptr<const DataSource> source, int64_t batch, bool shuffle, uint64_t seed,
              bool time_major = false, int rank = 0, int ranks = 1);
  ~BatchLoader();  // stops and joins the worker
  BatchLoader(const BatchLoader&) = delete;
  BatchLoader& operator=(const BatchLoader&) = delete;

  // Moves the next batch into data/labels (their previous buffers are recycled; any type is
  // accepted and replaced by the batch types). Rethrows an exception the worker hit for this batch.
  void next(Tensor& data, Tensor& labels);
  int64_t position() const;                     // batches consumed so far, over all epochs
  int64_t epoch() const;                        // epoch of the next batch: position() / batches_per_epoch()
  void seek(int64_t position);                  // continue as if `position` batches had been consumed
  int64_t batches_per_epoch() const { return per_epoch_; }
  int64_t batch() const { return batch_; }
  const DataSource& source() const { return *source_; }
  // Example indices of epoch e in order (the permutation described above).
  std::vector<int64_t> epoch_order(int64_t epoch) const;

 private:
  struct Ready {
    int64_t position = 0;
    uint64_t generation = 0;
    Tensor data, labels;
    std::exception_ptr error;
  };
  void work();

  std::shared_ptr<const DataSource> source_;
  int64_t batch_, per_epoch_;
  int64_t rank_, ranks_;
  bool shuffle_, time_major_;
  uint64_t seed_;

  mutable std::mutex mu_;
  std::condition_variable cv_;
  std::deque<Ready> ready_;         // prepared batches, in position order
  std::vector<Ready> spare_;        // recycled buffers for the worker
  int64_t position_ = 0;            // next batch next() returns
  int64_t produce_ = 0;             // next batch the worker prepares
  uint64_t generation_ = 0;         // bumped by seek(): batches of an older generation are dropped
  bool failed_ = false;             // the worker stopped after an error (until seek)
  bool stop_ = false;
  std::thread worker_;
};

// Evaluation pass: the whole source once, in order, in batches of `batch`; the last batch may be
// partial. fn(data, labels, count) sees full-size batch tensors (N = batch, as a static graph
// needs) whose first `count` examples are valid, the rest zero. The next batch is prepared on
// another thread while fn runs. Returns the number of batches.
int64_t for_each_eval_batch(const DataSource& src, int64_t batch, bool time_major,
                            const std::function<void(const Tensor& data, const Tensor& labels, int64_t count)>& fn);

}  // namespace mnemo
