// Batches from a DataSource (see data.h): batch layout, the shuffling training loader with its
// background worker, and the in-order evaluation pass.
//
// Worker protocol (all shared state under mu_): the worker takes position produce_++ and a spare
// buffer, fills it outside the lock, and appends it to ready_ unless seek() bumped generation_ in
// the meantime (then the buffer goes back to spare_). It keeps at most kAhead batches ready.
// next() waits for ready_.front(), swaps its tensors with the caller's, and recycles the caller's
// old tensors as a spare. An error is stored in its batch; it stays at the front of ready_ (every
// later next() rethrows it) and stops the worker until seek().
#include <algorithm>
#include <future>
#include <numeric>

#include "train/data/data.h"

namespace mnemo {

namespace {
// One batch prepared while the step runs is enough where preparing one is faster than a step (a
// few milliseconds against hundreds for the shipped configs), and each batch ahead is memory
// the plan does not hold (ResNet-56 b64: 768 KiB; a second one ahead measured no faster).
constexpr size_t kAhead = 1;

// Uniform in [0, k) from splitmix64, by rejection (no modulo bias, the same on every platform).
uint64_t bounded(uint64_t& state, uint64_t k) {
  const uint64_t threshold = (0 - k) % k;
  uint64_t r;
  do r = splitmix64(state);
  while (r < threshold);
  return r % k;
}
}  // namespace

TensorType batch_data_type(const DataSource& src, int64_t n, bool time_major) {
  Shape s = src.sample_shape();
  if (time_major) {
    MNEMO_CHECK(s.size() == 2) << "time-major batches need sequence samples {T,D}, but the source's samples are "
                               << shape_str(s);
    return {DType::f32, {s[0], n, s[1]}};
  }
  s.insert(s.begin(), n);
  return {DType::f32, s};
}

TensorType batch_label_type(const DataSource& src, int64_t n, bool time_major) {
  Shape l = src.label_shape();
  if (time_major) {
    const Shape s = src.sample_shape();
    MNEMO_CHECK(l.empty() || (l.size() == 1 && s.size() == 2 && l[0] == s[0]))
        << "time-major batches need labels {} or {T} with T = " << (s.empty() ? -1 : s[0]) << ", got labels "
        << shape_str(l) << " for samples " << shape_str(s);
    return l.empty() ? TensorType{DType::i32, {n}} : TensorType{DType::i32, {l[0], n}};
  }
  l.insert(l.begin(), n);
  return {DType::i32, l};
}

void fill_batch(const DataSource& src, const int64_t* indices, int64_t count, bool time_major, Tensor& data,
                Tensor& labels) {
  MNEMO_CHECK(data.shape().size() >= (time_major ? 2u : 1u)) << "batch data " << data.type().str() << " has no batch axis";
  const int64_t n = data.shape()[time_major ? 1 : 0];
  const TensorType dt = batch_data_type(src, n, time_major), lt = batch_label_type(src, n, time_major);
  MNEMO_CHECK(data.type() == dt && labels.type() == lt) << "batch tensors are " << data.type().str() << " and "
                                                        << labels.type().str() << ", expected " << dt.str() << " and "
                                                        << lt.str();
  MNEMO_CHECK(count >= 0 && count <= n) << "batch of " << n << " cannot hold " << count << " examples";
  if (count < n) {
    data.zero();
    labels.zero();
  }
  const int64_t per = numel(src.sample_shape()), lper = numel(src.label_shape());
  float* x = data.as<float>();
  int32_t* y = labels.as<int32_t>();
  if (!time_major) {
    for (int64_t i = 0; i < count; ++i) src.get(indices[i], x + i * per, y + i * lper);
    return;
  }
  const int64_t T = dt.shape[0], D = dt.shape[2];
  std::vector<float> xs(static_cast<size_t>(per));
  std::vector<int32_t> ys(static_cast<size_t>(std::max<int64_t>(lper, 1)));
  for (int64_t i = 0; i < count; ++i) {
    src.get(indices[i], xs.data(), ys.data());
    for (int64_t t = 0; t < T; ++t) std::copy_n(xs.data() + t * D, D, x + (t * n + i) * D);
    if (lt.shape.size() == 2) {
      for (int64_t t = 0; t < T; ++t) y[t * n + i] = ys[t];
    } else {
      y[i] = ys[0];
    }
  }
}

BatchLoader::BatchLoader(std::shared_ptr<const DataSource> source, int64_t batch, bool shuffle, uint64_t seed,
                         bool time_major, int rank, int ranks)
    : source_(std::move(source)), batch_(batch), per_epoch_(0), rank_(rank), ranks_(ranks), shuffle_(shuffle),
      time_major_(time_major), seed_(seed) {
  MNEMO_CHECK(source_) << "batch loader: no data source";
  MNEMO_CHECK(batch >= 1) << "batch loader: batch size must be at least 1, got " << batch;
  MNEMO_CHECK(ranks >= 1 && rank >= 0 && rank < ranks) << "batch loader: rank " << rank << " of " << ranks;
  MNEMO_CHECK(source_->size() / ranks >= batch) << "the data has " << source_->size() << " training examples, fewer than one batch of "
                                                << batch * ranks << " (data.batch" << (ranks > 1 ? " over the ranks" : "") << ")";
  per_epoch_ = source_->size() / (batch * ranks);
  batch_data_type(*source_, batch, time_major);  // validates the layout before the worker starts
  batch_label_type(*source_, batch, time_major);
  worker_ = std::thread([this] { work(); });
}

BatchLoader::~BatchLoader() {
  {
    std::lock_guard lk(mu_);
    stop_ = true;
  }
  cv_.notify_all();
  worker_.join();
}

std::vector<int64_t> BatchLoader::epoch_order(int64_t epoch) const {
  std::vector<int64_t> order(static_cast<size_t>(source_->size()));
  std::iota(order.begin(), order.end(), int64_t{0});
  if (!shuffle_) return order;
  uint64_t state = mix_seed(seed_, static_cast<uint64_t>(epoch));
  for (size_t i = order.size() - 1; i > 0; --i) std::swap(order[i], order[bounded(state, i + 1)]);
  return order;
}

void BatchLoader::work() {
  const TensorType dt = batch_data_type(*source_, batch_, time_major_);
  const TensorType lt = batch_label_type(*source_, batch_, time_major_);
  std::vector<int64_t> order;  // the worker's cache of one epoch's permutation
  int64_t order_epoch = -1;
  std::unique_lock lk(mu_);
  for (;;) {
    cv_.wait(lk, [&] { return stop_ || (!failed_ && ready_.size() < kAhead); });
    if (stop_) return;
    Ready r;
    if (!spare_.empty()) {
      r = std::move(spare_.back());
      spare_.pop_back();
    }
    r.position = produce_++;
    r.generation = generation_;
    r.error = nullptr;
    lk.unlock();
    try {
      const int64_t e = r.position / per_epoch_;
      if (e != order_epoch) {
        order = epoch_order(e);
        order_epoch = e;
      }
      if (r.data.type() != dt) r.data = Tensor(dt);
      if (r.labels.type() != lt) r.labels = Tensor(lt);
      fill_batch(*source_, order.data() + (r.position % per_epoch_) * batch_ * ranks_ + rank_ * batch_, batch_, time_major_,
                 r.data, r.labels);
    } catch (...) {
      r.error = std::current_exception();
    }
    lk.lock();
    if (r.generation != generation_) {
      r.error = nullptr;
      spare_.push_back(std::move(r));
      continue;
    }
    if (r.error) failed_ = true;
    ready_.push_back(std::move(r));
    cv_.notify_all();
  }
}

void BatchLoader::next(Tensor& data, Tensor& labels) {
  std::unique_lock lk(mu_);
  cv_.wait(lk, [&] { return !ready_.empty(); });
  Ready& r = ready_.front();
  if (r.error) std::rethrow_exception(r.error);  // stays at the front: later calls rethrow it too
  MNEMO_CHECK(r.position == position_) << "batch loader: internal error, batch " << r.position << " ready at position "
                                       << position_;
  std::swap(data, r.data);
  std::swap(labels, r.labels);
  ++position_;
  if (spare_.size() < kAhead + 1) spare_.push_back(std::move(r));
  ready_.pop_front();
  lk.unlock();
  cv_.notify_all();
}

int64_t BatchLoader::position() const {
  std::lock_guard lk(mu_);
  return position_;
}

int64_t BatchLoader::epoch() const { return position() / per_epoch_; }

void BatchLoader::seek(int64_t position) {
  MNEMO_CHECK(position >= 0) << "batch loader: cannot seek to negative position " << position;
  {
    std::lock_guard lk(mu_);
    ++generation_;
    for (Ready& r : ready_) {
      r.error = nullptr;
      if (spare_.size() < kAhead + 1) spare_.push_back(std::move(r));
    }
    ready_.clear();
    position_ = produce_ = position;
    failed_ = false;
  }
  cv_.notify_all();
}

int64_t for_each_eval_batch(const DataSource& src, int64_t batch, bool time_major,
                            const std::function<void(const Tensor& data, const Tensor& labels, int64_t count)>& fn) {
  MNEMO_CHECK(batch >= 1) << "evaluation: batch size must be at least 1, got " << batch;
  const int64_t n = src.size(), batches = (n + batch - 1) / batch;
  const TensorType dt = batch_data_type(src, batch, time_major), lt = batch_label_type(src, batch, time_major);
  Tensor data[2] = {Tensor(dt), Tensor(dt)}, labels[2] = {Tensor(lt), Tensor(lt)};
  auto fill = [&](int64_t b, int slot) {
    const int64_t begin = b * batch, count = std::min(batch, n - begin);
    std::vector<int64_t> idx(static_cast<size_t>(count));
    std::iota(idx.begin(), idx.end(), begin);
    fill_batch(src, idx.data(), count, time_major, data[slot], labels[slot]);
    return count;
  };
  if (batches == 0) return 0;
  int64_t count = fill(0, 0);
  for (int64_t b = 0; b < batches; ++b) {
    const int cur = static_cast<int>(b % 2);
    std::future<int64_t> ahead;
    if (b + 1 < batches) ahead = std::async(std::launch::async, fill, b + 1, 1 - cur);
    fn(data[cur], labels[cur], count);  // if fn throws, ahead's destructor waits for the fill
    if (ahead.valid()) count = ahead.get();
  }
  return batches;
}

}  // namespace mnemo
