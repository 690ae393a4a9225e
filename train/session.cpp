// Training sessions (see session.h).
#include "train/session.h"

#include <omp.h>
#include <unistd.h>

#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <functional>
#include <fstream>
#include <map>

#include <nlohmann/json.hpp>

#include "core/executor.h"
#include "train/checkpoint.h"
#include "train/device_state.h"
#include "train/param_store.h"
#include "train/pipeline.h"
#include "train/safetensors.h"
#include "train/schedule.h"

#include <algorithm>
#include "train/sgd.h"

namespace mnemo {
namespace {

using Clock = std::chrono::steady_clock;
double seconds_since(Clock::time_point t) { return std::chrono::duration<double>(Clock::now() - t).count(); }

int64_t peak_rss_bytes() {
  std::ifstream in("/proc/self/status");
  std::string line;
  while (std::getline(in, line))
    if (line.rfind("VmHWM:", 0) == 0) return std::stoll(line.substr(6)) * 1024;
  return 0;
}

std::string hms(double s) {
  char buf[32];
  const int t = static_cast<int>(s + 0.5);
  if (t >= 3600) std::snprintf(buf, sizeof buf, "%d:%02d:%02d", t / 3600, t / 60 % 60, t % 60);
  else std::snprintf(buf, sizeof buf, "%d:%02d", t / 60, t % 60);
  return buf;
}

bool time_major(const Config& c) { return c.model_type == "lstm"; }

void print_report(const MemoryReport& r, int64_t allocated, const char* prefix) {
  std::printf("%smemory (%s): feature maps %s, workspace %s, params %s, param grads %s, optimizer %s, inputs %s -> total %s\n",
              prefix, r.mode.c_str(), format_bytes(r.feature_map_bytes).c_str(), format_bytes(r.workspace_bytes).c_str(),
              format_bytes(r.param_bytes).c_str(), format_bytes(r.param_grad_bytes).c_str(),
              format_bytes(r.optimizer_bytes).c_str(), format_bytes(r.input_bytes).c_str(), format_bytes(r.total_bytes).c_str());
  std::printf("%s  arena planned %s, allocated %s%s; max live %s, fragmentation %.2f%%, planned in %.3f s\n", prefix,
              format_bytes(r.arena_bytes).c_str(), format_bytes(allocated).c_str(), allocated == r.arena_bytes ? " (equal)" : " (DIFFERENT)",
              format_bytes(r.max_live_bytes).c_str(), 100 * r.fragmentation, r.planning_seconds);
}

// The device's memory against the plan: what mnemo allocated (arena + parameters and optimiser
// state + input staging) and the cudaMemGetInfo peak minus the context and library handles.
void print_device_memory(const Device& d, const MemoryReport& r, int64_t persistent, int64_t peak) {
  const int64_t mine = std::max<int64_t>(0, peak - d.memory_at_open());
  std::printf("  device %s: planned total %s; allocated by mnemo %s (arena %s, parameters+optimiser %s, input staging rest); "
              "measured peak in use %s minus %s at open (context, cuDNN, cuBLAS) = %s (%.3fx the planned total)\n",
              d.name().c_str(), format_bytes(r.total_bytes).c_str(), format_bytes(d.allocated_bytes()).c_str(),
              format_bytes(r.arena_bytes).c_str(), format_bytes(persistent).c_str(), format_bytes(peak).c_str(),
              format_bytes(d.memory_at_open()).c_str(), format_bytes(mine).c_str(),
              r.total_bytes ? static_cast<double>(mine) / static_cast<double>(r.total_bytes) : 0.0);
}

// Counts correct predictions of the first `count` examples: argmax over each logits row.
int64_t count_correct(const Executor& ex, const BuiltModel& m, const Tensor& labels, int64_t count, bool tm, int64_t* scored) {
  int64_t correct = 0;
  const int32_t* y = labels.as<int32_t>();
  for (size_t t = 0; t < m.all_logits.size(); ++t) {
    const Tensor logits = ex.fetch(m.all_logits[t]);  // a host copy (from the device, when there is one)
    const TensorView lv = logits.view();
    const int64_t n = lv.dim(0), classes = lv.dim(1);
    const float* p = lv.as<float>();
    for (int64_t i = 0; i < count; ++i) {
      const float* row = p + i * classes;
      const int64_t pred = std::max_element(row, row + classes) - row;
      // Labels: [N] for one classifier; [T,N] time-major for per-step classifiers.
      const int32_t label = m.all_logits.size() == 1 ? y[i] : y[t * n + i];
      correct += pred == label;
      ++*scored;
    }
  }
  return correct;
}

struct EvalResult {
  double accuracy = 0, loss = 0;
  int64_t examples = 0;
};

// Host batches where an executor reads them: the host tensors themselves on the CPU; on a device,
// copies in device buffers allocated at the first call (nothing is allocated per batch).
struct DeviceInputs {
  Device* device = nullptr;
  std::vector<std::unique_ptr<char, std::function<void(char*)>>> buffers;
  std::vector<TensorView> put(std::initializer_list<const Tensor*> host) {
    std::vector<TensorView> out;
    if (!device) {
      for (const Tensor* t : host) out.push_back(t->view());
      return out;
    }
    size_t i = 0;
    for (const Tensor* t : host) {
      if (buffers.size() <= i) {
        Device* d = device;
        buffers.emplace_back(static_cast<char*>(d->allocate(static_cast<int64_t>(t->bytes()), "an input batch")),
                             [d](char* p) { d->release(p); });
      }
      device->copy(buffers[i].get(), t->data(), static_cast<int64_t>(t->bytes()), CopyKind::host_to_device);
      out.push_back(TensorView{buffers[i].get(), t->type()});
      ++i;
    }
    return out;
  }
};

// A planned training step ready to run, shared by train, grad and bench: the mirror and memory
// plan for `device` (null: the CPU), the executor on it, and the parameters bound — the host
// stores on the CPU, or DeviceParams (one device allocation of the parameters and, with `sgd`,
// the velocities) on a device. Not movable: the executor refers to the plan's graph.
class BoundStep {
 public:
  // `capture`: on a device that can, replay the step as one captured graph (Executor::set_capture).
  BoundStep(const Config& c, const Pipeline& p, ParamStore& params, Sgd* sgd, Device* device, bool capture = false)
      : p_(p), params_(params), sgd_(sgd), mr_(plan_pipeline(c, p, c.memory, device)),
        ex_(mr_.training.graph, mr_.planned.plan, device), inputs_{device, {}}, grads_(mr_.training.grads.size()) {
    if (device) {
      dparams_ = std::make_unique<DeviceParams>(*device, params, sgd, sgd ? sgd->options() : SgdOptions{});
      dparams_->bind(ex_);
      ex_.set_capture(capture);
    } else {
      params.bind(ex_);
    }
  }
  BoundStep(const BoundStep&) = delete;
  BoundStep& operator=(const BoundStep&) = delete;

  const MirrorResult& result() const { return mr_; }
  const TrainingGraph& training() const { return mr_.training; }
  Executor& executor() { return ex_; }
  DeviceParams* device_params() { return dparams_.get(); }
  TensorType input_type(const std::string& name) const { return ex_.entry({mr_.training.graph.find(name), 0}).type; }

  // Binds data and labels that are already where the executor runs.
  void bind(TensorView x, TensorView y) {
    ex_.bind(p_.model.data, x);
    ex_.bind(p_.model.labels, y);
  }
  // Binds a batch held on the host (DeviceInputs; synchronous: the training loop stages instead).
  void bind_host(const Tensor& x, const Tensor& y) {
    const std::vector<TensorView> v = inputs_.put({&x, &y});
    bind(v[0], v[1]);
  }
  void run() { ex_.run(); }
  double loss() const { return ex_.fetch(mr_.training.loss).as<float>()[0]; }
  // One SGD step with learning rate `lr` on this step's gradients, where the parameters live.
  void update(double lr) {
    for (size_t k = 0; k < grads_.size(); ++k) grads_[k] = ex_.entry(mr_.training.grads[k].grad);
    if (dparams_) dparams_->sgd_step(grads_, lr);
    else sgd_->step(params_, grads_, lr);
  }

 private:
  const Pipeline& p_;
  ParamStore& params_;
  Sgd* sgd_;
  MirrorResult mr_;
  Executor ex_;
  DeviceInputs inputs_;
  std::unique_ptr<DeviceParams> dparams_;
  std::vector<TensorView> grads_;
};

// Test-set evaluation with the eval-mode graph (BatchNorm on running statistics), built once and
// reused by every evaluation of a run: its arena (and on a device its input buffers) is allocated
// at the first evaluation and kept. The parameters are bound where training keeps them (on a
// device: `dparams`), so an evaluation sees the current weights.
class Evaluator {
 public:
  Evaluator(const Config& c, const DataShape& ds, const ParamStore& params, Device* device, const DeviceParams* dparams,
            bool capture)
      : c_(c), m_(build_model(c, ds, c.model_type == "graph" ? c.data.batch : (c.data.eval_batch ? c.data.eval_batch : c.data.batch), false)),
        fg_(m_.builder.graph()), inputs_{device, {}} {
    fg_.outputs = m_.all_logits;
    fg_.outputs.push_back(m_.loss);
    ex_ = std::make_unique<Executor>(fg_, plan_memory(fg_, AllocMode::share, nullptr, {}, device), device);
    ex_->set_capture(capture);
    if (dparams) dparams->bind(*ex_);
    else
      for (const ParamSpec& s : m_.builder.params()) ex_->bind(s.name, params.at(s.name).view());
  }
  EvalResult run(const DataSource& test);

 private:
  const Config& c_;
  BuiltModel m_;
  Graph fg_;
  DeviceInputs inputs_;
  std::unique_ptr<Executor> ex_;
};

EvalResult Evaluator::run(const DataSource& test) {
  int64_t correct = 0, scored = 0;
  double loss_sum = 0;
  int64_t batches = 0;
  const bool tm = time_major(c_);
  const int64_t batch = fg_.type({fg_.find(m_.data), 0}).shape[tm ? 1 : 0];
  for_each_eval_batch(test, batch, tm, [&](const Tensor& x, const Tensor& y, int64_t count) {
    const std::vector<TensorView> v = inputs_.put({&x, &y});
    ex_->bind(m_.data, v[0]);
    ex_->bind(m_.labels, v[1]);
    ex_->run();
    correct += count_correct(*ex_, m_, y, count, tm, &scored);
    if (count == batch) loss_sum += ex_->fetch(m_.loss).as<float>()[0], ++batches;
  });
  return {scored ? static_cast<double>(correct) / static_cast<double>(scored) : 0.0, batches ? loss_sum / batches : 0.0, scored};
}

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
  if (d.source == "text") return std::make_shared<TextChars>(d.path, d.steps);
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

int run_train(const TrainOptions& opt) {
  Config c = load_config(opt.config);
  if (!opt.memory.empty()) c.memory = opt.memory;
  if (!opt.device.empty()) c.device = opt.device;
  parse_memory_mode(c.memory);  // a bad mode fails before any work
  if (c.run.threads > 0) omp_set_num_threads(c.run.threads);
  const auto t_setup = Clock::now();

  std::shared_ptr<const DataSource> train = make_source(c, Split::train);
  const DataShape ds = data_shape_of(c, *train);
  Pipeline p = build_pipeline(c, ds, c.data.batch);
  const Graph& fwd = p.model.builder.graph();
  ParamStore params(fwd, p.model.builder.params(), c.run.seed);
  if (!opt.save_init.empty()) {
    std::vector<std::pair<std::string, TensorView>> ts;
    for (const ParamSpec& s : params.specs()) ts.push_back({s.name, params.at(s.name).view()});
    write_safetensors(opt.save_init, ts, {{"format", "mnemo-weights-1"}, {"config", opt.config}});
    std::printf("wrote the initial weights (%zu tensors) to %s\n", ts.size(), opt.save_init.c_str());
    return 0;
  }
  Sgd sgd(params, {c.optimizer.lr, c.optimizer.momentum, c.optimizer.weight_decay});
  BatchLoader loader(train, c.data.batch, true, c.run.seed, time_major(c));
  const int64_t total = opt.steps ? opt.steps : c.run.steps ? c.run.steps : c.run.epochs * loader.batches_per_epoch();
  TrainState state{0, 0, c.run.seed};
  if (!opt.resume.empty()) {
    state = load_checkpoint(opt.resume, params, sgd);
    MNEMO_CHECK(state.seed == c.run.seed) << "checkpoint " << opt.resume << " was made with train.seed " << state.seed
                                          << ", the config has " << c.run.seed;
    loader.seek(state.data_position);
    std::printf("resumed from %s at step %lld\n", opt.resume.c_str(), static_cast<long long>(state.step));
  }

  const int64_t rss0 = peak_rss_bytes();
  std::unique_ptr<Device> device = open_run_device(c, opt.device);
  BoundStep step(c, p, params, &sgd, device.get(), !opt.eager);
  const TrainingGraph& training = step.training();
  const PlannedStep& ps = step.result().planned;
  Executor& ex = step.executor();
  DeviceParams* dparams = step.device_params();
  if (device) {
    const TensorType io[2] = {step.input_type(p.model.data), step.input_type(p.model.labels)};
    device->reserve_inputs(io, 2);  // double-buffered: the next batch uploads while this step runs
  }
  ex.set_profiling(opt.profile);
  const std::string where = device ? device->name() : std::to_string(omp_get_max_threads()) + " CPU threads";
  std::printf("mnemo train %s: %s, %d layers, %zu training nodes, batch %lld, %s, %lld steps (%lld per epoch)\n",
              opt.config.c_str(), c.model_type.c_str(), p.model.layers, training.graph.size(),
              static_cast<long long>(c.data.batch), where.c_str(), static_cast<long long>(total),
              static_cast<long long>(loader.batches_per_epoch()));
  print_report(ps.report, ex.allocated_bytes(), "");

  Tensor x, y;
  std::unique_ptr<std::ofstream> metrics;
  if (!c.run.metrics.empty()) {
    std::filesystem::path mp(c.run.metrics);
    if (mp.has_parent_path()) std::filesystem::create_directories(mp.parent_path());
    metrics = std::make_unique<std::ofstream>(c.run.metrics, state.step ? std::ios::app : std::ios::trunc);
    MNEMO_CHECK(*metrics) << "cannot write metrics file '" << c.run.metrics << "'";
  }
  if (!c.checkpoint.dir.empty()) std::filesystem::create_directories(c.checkpoint.dir);
  bool staged = false;  // on a device: the next batch is already taken from the loader and uploading
  auto checkpoint = [&](const std::string& path) {
    state.data_position = loader.position() - (staged ? 1 : 0);
    if (dparams) dparams->download(params, &sgd);
    save_checkpoint(path, params, sgd, state, opt.config);
  };
  std::vector<TensorView> next_inputs;
  auto stage_next = [&] {
    loader.next(x, y);
    const TensorView host[2] = {x.view(), y.view()};
    next_inputs = device->stage_inputs(host);
    staged = true;
  };
  int64_t device_peak = 0;  // cudaMemGetInfo-measured bytes in use, sampled after steps and evaluations

  const bool tty = isatty(STDOUT_FILENO);
  std::shared_ptr<const DataSource> test;  // loaded at the first evaluation, then reused
  auto test_source = [&]() -> const DataSource& {
    if (!test) test = make_source(c, Split::test);
    return *test;
  };
  std::unique_ptr<Evaluator> evaluator;  // built at the first evaluation
  auto evaluate = [&] {
    if (!evaluator) evaluator = std::make_unique<Evaluator>(c, ds, params, device.get(), dparams, !opt.eager);
    EvalResult er = evaluator->run(test_source());
    if (device) device_peak = std::max(device_peak, device->memory_in_use());
    return er;
  };
  const auto t0 = Clock::now();
  double loss_ema = 0;
  const int64_t first = state.step;
  if (device && state.step < total) stage_next();
  while (state.step < total) {
    const double lr = learning_rate(c.optimizer, c.schedule, state.step, total);
    double loss = 0;
    if (device) {
      // Enqueue the step and its update, then take and upload the next batch while the device
      // computes; reading the loss waits for this step only.
      step.bind(next_inputs[0], next_inputs[1]);
      staged = false;
      step.run();
      step.update(lr);
      if (state.step + 1 < total) stage_next();
      loss = step.loss();
      if (state.step - first < 3 || (state.step + 1) % 50 == 0) device_peak = std::max(device_peak, device->memory_in_use());
    } else {
      loader.next(x, y);
      step.bind_host(x, y);
      step.run();
      loss = step.loss();
    }
    if (!std::isfinite(loss)) {
      if (tty) std::printf("\n");
      MNEMO_FAIL() << "the loss is " << loss << " at step " << state.step + 1 << " (lr " << lr
                   << "): training diverged; lower optimizer.lr or add warm-up"
                   << (device ? " (on a device a label outside [0, classes) also gives a NaN loss: the kernels cannot throw)" : "")
                   << ". The last checkpoint is unchanged.";
    }
    if (!device) step.update(lr);  // on the CPU after the divergence check: a NaN never reaches the weights
    ++state.step;
    loss_ema = state.step - first == 1 ? loss : 0.95 * loss_ema + 0.05 * loss;
    const double elapsed = seconds_since(t0);
    const double rate = (state.step - first) / elapsed;
    if (metrics)
      *metrics << nlohmann::json{{"step", state.step}, {"epoch", static_cast<double>(state.step) / loader.batches_per_epoch()},
                                 {"loss", loss}, {"lr", lr}, {"steps_per_s", rate}, {"examples_per_s", rate * c.data.batch}}.dump()
               << "\n";
    const double eta = (total - state.step) / rate;
    if (tty) {
      const int width = 30, done = static_cast<int>(width * state.step / total);
      std::printf("\r[%.*s%*s] %lld/%lld loss %.4f lr %.4g %.2f it/s %.0f ex/s ETA %s   ", done, "##############################",
                  width - done, "", static_cast<long long>(state.step), static_cast<long long>(total), loss_ema, lr, rate,
                  rate * c.data.batch, hms(eta).c_str());
      std::fflush(stdout);
    } else if (state.step % c.run.log_every == 0 || state.step == total) {
      std::printf("step %lld/%lld epoch %.2f loss %.4f (avg %.4f) lr %.4g %.2f steps/s %.0f examples/s eta %s\n",
                  static_cast<long long>(state.step), static_cast<long long>(total),
                  static_cast<double>(state.step) / loader.batches_per_epoch(), loss, loss_ema, lr, rate, rate * c.data.batch,
                  hms(eta).c_str());
    }
    if (!c.checkpoint.dir.empty() && c.checkpoint.every && state.step % c.checkpoint.every == 0)
      checkpoint(c.checkpoint.dir + "/checkpoint.safetensors");
    if (c.run.eval_every && state.step % c.run.eval_every == 0 && state.step < total && c.data.eval) {
      EvalResult er = evaluate();
      if (tty) std::printf("\n");
      std::printf("eval at step %lld: test accuracy %.2f%% (%lld examples)\n", static_cast<long long>(state.step), 100 * er.accuracy,
                  static_cast<long long>(er.examples));
      if (metrics) *metrics << nlohmann::json{{"step", state.step}, {"test_accuracy", er.accuracy}, {"test_loss", er.loss}}.dump() << "\n";
    }
  }
  if (tty) std::printf("\n");
  const double train_s = seconds_since(t0);
  if (opt.profile) {
    std::map<std::string, std::pair<double, int>> by_op;
    for (size_t v = 0; v < ex.profile().size(); ++v) {
      auto& [t, n] = by_op[training.graph.node(static_cast<int>(v)).op->name];
      t += ex.profile()[v];
      n += ex.profile()[v] > 0;
    }
    std::vector<std::pair<double, std::string>> rows;
    double sum = 0;
    for (const auto& [op, tn] : by_op) rows.push_back({tn.first, op}), sum += tn.first;
    std::sort(rows.rbegin(), rows.rend());
    std::printf("profile (%lld steps, %.3f s/step in kernels):\n", static_cast<long long>(state.step - first), sum / std::max<int64_t>(1, state.step - first));
    for (const auto& [t, op] : rows)
      if (t > 0) std::printf("  %-28s %8.2f ms/step %5.1f%%\n", op.c_str(), 1000 * t / (state.step - first), 100 * t / sum);
  }
  if (!c.checkpoint.dir.empty()) checkpoint(c.checkpoint.dir + "/checkpoint.safetensors");
  if (!opt.checkpoint.empty()) checkpoint(opt.checkpoint);
  if (state.step > first)
    std::printf("trained %lld steps in %.1f min (%.3f s/step); final loss %.4f (avg %.4f)\n", static_cast<long long>(state.step - first),
                train_s / 60, train_s / (state.step - first), step.loss(), loss_ema);
  else
    std::printf("nothing to train: already at step %lld of %lld\n", static_cast<long long>(state.step), static_cast<long long>(total));
  if (opt.eval && c.data.eval) {
    const auto te = Clock::now();
    EvalResult er = evaluate();
    std::printf("test accuracy %.2f%% on %lld examples (test loss %.4f, %.1f s)\n", 100 * er.accuracy,
                static_cast<long long>(er.examples), er.loss, seconds_since(te));
    if (metrics) *metrics << nlohmann::json{{"step", state.step}, {"test_accuracy", er.accuracy}, {"test_loss", er.loss}}.dump() << "\n";
  }
  print_report(ps.report, ex.allocated_bytes(), "");
  if (device) {
    print_device_memory(*device, ps.report, dparams->bytes(), std::max(device_peak, device->memory_in_use()));
    std::printf("  the step ran as %s\n", ex.captures() ? (std::to_string(ex.captures()) + " captured graph(s), replayed").c_str()
                                                         : "kernel launches node by node");
  } else {
    std::printf("  measured: arena %s allocated by the executor; peak RSS grew %s during training (setup took %.1f s)\n",
                format_bytes(ex.allocated_bytes()).c_str(), format_bytes(std::max<int64_t>(0, peak_rss_bytes() - rss0)).c_str(),
                seconds_since(t_setup) - train_s);
  }
  return 0;
}

int run_grad(const GradOptions& opt) {
  Config c = load_config(opt.config);
  TensorFile batch = read_safetensors(opt.batch);
  for (const char* k : {"data", "labels"})
    MNEMO_CHECK(batch.tensors.count(k)) << "batch file " << opt.batch << " has no tensor '" << k << "' (it needs 'data' and 'labels')";
  const Tensor& x = batch.tensors.at("data");
  const Tensor& y = batch.tensors.at("labels");
  const bool tm = time_major(c);
  MNEMO_CHECK(x.shape().size() >= 2) << "batch file " << opt.batch << ": 'data' is " << x.type().str();
  const int64_t n = x.shape()[tm ? 1 : 0];
  DataShape ds;
  if (c.data.source == "text") {
    ds = data_shape_of(c, *make_source(c, Split::train));
  } else {
    ds = static_data_shape(c);
  }
  Pipeline p = build_pipeline(c, ds, n);
  const Graph& fwd = p.model.builder.graph();
  ParamStore params(fwd, p.model.builder.params(), c.run.seed);
  TensorFile w = read_safetensors(opt.weights);
  for (const ParamSpec& s : params.specs()) {
    auto it = w.tensors.find(s.name);
    MNEMO_CHECK(it != w.tensors.end()) << "weights file " << opt.weights << " has no tensor '" << s.name << "' (see docs/FORMATS.md)";
    MNEMO_CHECK(it->second.type() == params.at(s.name).type())
        << "weights file " << opt.weights << ": '" << s.name << "' is " << it->second.type().str() << ", the model needs "
        << params.at(s.name).type().str();
    std::memcpy(params.at(s.name).data(), it->second.data(), it->second.bytes());
  }
  MNEMO_CHECK(w.tensors.size() == params.specs().size()) << "weights file " << opt.weights << " holds " << w.tensors.size()
                                                         << " tensors, the model has " << params.specs().size() << " parameters";
  if (!opt.memory.empty()) c.memory = opt.memory;
  std::unique_ptr<Device> device = open_run_device(c, opt.device);
  BoundStep step(c, p, params, nullptr, device.get());
  step.bind_host(x, y);
  step.run();
  // Host copies of the loss and every gradient (from the device, when there is one).
  std::vector<Tensor> host;
  host.push_back(step.executor().fetch(step.training().loss));
  std::vector<std::pair<std::string, TensorView>> out{{"loss", host.back().view()}};
  for (const ParamGrad& g : step.training().grads) {
    host.push_back(step.executor().fetch(g.grad));
    out.push_back({"grad/" + fwd.node(g.param).name, host.back().view()});
  }
  write_safetensors(opt.out, out, {{"format", "mnemo-grad-1"}, {"config", opt.config}});
  std::printf("loss %.6f; wrote the loss and %zu gradients to %s%s%s\n", host[0].as<float>()[0], out.size() - 1, opt.out.c_str(),
              device ? " (computed on " : "", device ? (device->name() + ")").c_str() : "");
  return 0;
}

}  // namespace mnemo

namespace mnemo {

int run_bench(const BenchOptions& opt) {
  Config c = load_config(opt.config);
  if (!opt.memory.empty()) c.memory = opt.memory;
  if (opt.batch) c.data.batch = opt.batch;
  if (c.run.threads > 0) omp_set_num_threads(c.run.threads);
  const DataShape ds = c.data.source == "text" ? data_shape_of(c, *make_source(c, Split::train)) : static_data_shape(c);
  Pipeline p = build_pipeline(c, ds, c.data.batch);
  ParamStore params(p.model.builder.graph(), p.model.builder.params(), c.run.seed);
  Sgd sgd(params, {c.optimizer.lr, c.optimizer.momentum, c.optimizer.weight_decay});
  std::unique_ptr<Device> device = open_run_device(c, opt.device);
  BoundStep step(c, p, params, &sgd, device.get(), !opt.eager);
  const PlannedStep& ps = step.result().planned;
  Tensor x(step.input_type(p.model.data)), y(step.input_type(p.model.labels));
  // Inputs drawn once: the step time does not depend on their values.
  uint64_t s = 12345;
  for (int64_t i = 0; i < x.numel(); ++i) x.as<float>()[i] = static_cast<float>((splitmix64(s) >> 40) * 0x1.0p-24 * 2.0 - 1.0);
  for (int64_t i = 0; i < y.numel(); ++i) y.as<int32_t>()[i] = static_cast<int32_t>(splitmix64(s) % static_cast<uint64_t>(ds.classes));
  step.bind_host(x, y);
  std::vector<double> times;
  int64_t device_peak = 0;
  for (int i = 0; i < opt.warmup + opt.steps; ++i) {
    const auto t0 = Clock::now();
    step.run();
    step.update(1e-3);
    if (device) device->synchronize();  // the step's time is the device's
    if (i >= opt.warmup) times.push_back(seconds_since(t0));
    if (device) device_peak = std::max(device_peak, device->memory_in_use());  // outside the timed region
  }
  std::sort(times.begin(), times.end());
  const double median = times[times.size() / 2];
  const MemoryReport& r = ps.report;
  if (opt.json) {
    nlohmann::json j = to_json(r);
    j["config"] = opt.config;
    j["batch"] = c.data.batch;
    j["threads"] = omp_get_max_threads();
    j["device"] = device ? device->name() : "cpu";
    j["captured_graphs"] = step.executor().captures();
    if (device) {
      j["device_allocated_bytes"] = device->allocated_bytes();
      j["device_peak_in_use_bytes"] = device_peak;
      j["device_in_use_at_open_bytes"] = device->memory_at_open();
      j["device_measured_bytes"] = device_peak - device->memory_at_open();
    }
    j["step_seconds_median"] = median;
    j["step_seconds_min"] = times.front();
    j["step_seconds_max"] = times.back();
    j["steps"] = opt.steps;
    std::printf("%s\n", j.dump().c_str());
  } else {
    const std::string where = device ? device->name() : std::to_string(omp_get_max_threads()) + " threads";
    std::printf("%s: %s batch %lld, %s, mode %s: median %.4f s/step (min %.4f, max %.4f over %d steps), %.1f examples/s; "
                "feature maps %s, total %s\n",
                opt.config.c_str(), c.model_type.c_str(), static_cast<long long>(c.data.batch), where.c_str(), r.mode.c_str(),
                median, times.front(), times.back(), opt.steps, c.data.batch / median, format_bytes(r.feature_map_bytes).c_str(),
                format_bytes(r.total_bytes).c_str());
    if (device) print_device_memory(*device, r, step.device_params()->bytes(), device_peak);
  }
  return 0;
}

}  // namespace mnemo
