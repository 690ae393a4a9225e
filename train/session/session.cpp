// Training sessions (see session.h).
#include "train/session/session.h"

#include <malloc.h>
#include <omp.h>
#include <unistd.h>

#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <functional>
#include <fstream>
#include <map>

#include <nlohmann/json.hpp>

#include <algorithm>

#include "core/executor.h"
#include "core/stats.h"
#include "train/config/files.h"
#include "train/session/checkpoint.h"
#include "train/session/metrics.h"
#include "train/session/device_state.h"
#include "train/session/param_store.h"
#include "train/session/pipeline.h"
#include "train/session/safetensors.h"
#include "train/config/schedule.h"
#include "train/session/sgd.h"
#include "train/session/step.h"
#include "train/parallel/mpi_comm.h"
#ifdef MNEMO_HAVE_NCCL
#include "cuda/nccl.h"
#endif
#include "autograd/allreduce.h"

// jemalloc's control interface when the binary links jemalloc (weak: null under glibc's malloc,
// as in the sanitizer build and the tests).
extern "C" int mallctl(const char* name, void* oldp, size_t* oldlenp, void* newp, size_t newlen) __attribute__((weak));

namespace mnemo {
namespace {

using Clock = std::chrono::steady_clock;
double seconds_since(Clock::time_point t) { return std::chrono::duration<double>(Clock::now() - t).count(); }

int64_t status_bytes(const char* key) {  // a "kB" line of /proc/self/status, in bytes (0 if absent)
  std::ifstream in("/proc/self/status");
  std::string line;
  const size_t n = std::strlen(key);
  while (std::getline(in, line))
    if (line.compare(0, n, key) == 0) return std::stoll(line.substr(n)) * 1024;
  return 0;
}
int64_t peak_rss_bytes() { return status_bytes("VmHWM:"); }

// Resident bytes of executable mappings (/proc/self/smaps): the libraries' text the run pages in
// and the JIT kernels oneDNN generates. Code, not data: the plan does not hold it. 0 if unreadable.
int64_t code_rss_bytes() {
  std::ifstream in("/proc/self/smaps");
  std::string line;
  int64_t total = 0;
  bool exec = false;
  while (std::getline(in, line)) {
    // A mapping's header: "start-end perms offset dev inode [path]"; its fields are "Key: value kB".
    const size_t sp = line.find(' ');
    if (sp != std::string::npos && line.find('-') < sp && line.size() > sp + 4) {
      exec = line[sp + 3] == 'x';
    } else if (exec && line.compare(0, 4, "Rss:") == 0) {
      total += std::stoll(line.substr(4)) * 1024;
    }
  }
  return total;
}

// After planning: the planner's temporary graphs are freed; glibc's freed pages are returned
// (malloc_trim) and the kernel's peak-RSS mark is reset to the current RSS (clear_refs 5), so the
// run's peak growth is measured from here and can be compared with the planned total. Returns
// the RSS to measure from, or -1 where the mark cannot be reset (then the growth counts from the
// start, planning included).
int64_t reset_peak_rss() {
  malloc_trim(0);
  // The mnemo binary's malloc is jemalloc (docs/DESIGN.md), where malloc_trim does nothing: its
  // arenas keep the planner's freed pages (dirty, purged only after a decay time) and the run
  // reuses them, so the growth from here would understate the run's memory. Purge them too.
  if (mallctl) {
    mallctl("thread.tcache.flush", nullptr, nullptr, nullptr, 0);  // small freed objects cached per thread
    mallctl("arena.4096.purge", nullptr, nullptr, nullptr, 0);     // 4096: MALLCTL_ARENAS_ALL
  }
  std::ofstream out("/proc/self/clear_refs");
  if (!(out << "5" << std::flush)) return -1;
  out.close();
  if (!out) return -1;
  return status_bytes("VmRSS:");
}

std::string hms(double s) {
  if (!(s >= 0) || s > 1e12) return "?";  // no rate yet, or beyond any useful estimate
  char buf[48];
  const long long t = static_cast<long long>(s + 0.5);
  if (t >= 3600) std::snprintf(buf, sizeof buf, "%lld:%02lld:%02lld", t / 3600, t / 60 % 60, t % 60);
  else std::snprintf(buf, sizeof buf, "%lld:%02lld", t / 60, t % 60);
  return buf;
}

bool time_major(const Config& c) { return c.model_type == "lstm"; }

void print_report(const MemoryReport& r, int64_t allocated, const char* prefix) {
  std::printf("%smemory (%s): arena %s (feature maps %s, param grads at most %s at once, workspace %s) + params %s + "
              "optimizer %s + inputs %s -> total %s\n",
              prefix, r.mode.c_str(), format_bytes(r.arena_bytes).c_str(), format_bytes(r.feature_map_bytes).c_str(),
              format_bytes(r.param_grad_bytes).c_str(), format_bytes(r.workspace_bytes).c_str(), format_bytes(r.param_bytes).c_str(),
              format_bytes(r.optimizer_bytes).c_str(), format_bytes(r.input_bytes).c_str(), format_bytes(r.total_bytes).c_str());
  std::printf("%s  arena planned %s, allocated %s%s; max live %s, fragmentation %.2f%%, planned in %.3f s\n", prefix,
              format_bytes(r.arena_bytes).c_str(), format_bytes(allocated).c_str(), allocated == r.arena_bytes ? " (equal)" : " (DIFFERENT)",
              format_bytes(r.max_live_bytes).c_str(), 100 * r.fragmentation, r.planning_seconds);
  if (r.arena_bytes > r.max_live_bytes)
    std::printf("%s  placement: %s; no packing is below %s\n", prefix, r.placement.c_str(), format_bytes(r.arena_bound_bytes).c_str());
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

// Copies the tensors of a weights file into the parameter store (every parameter, exact types);
// `what` names the flag for errors. Checked completely before anything is copied.
void load_weights(const std::string& path, const char* what, ParamStore& params) {
  TensorFile w = read_safetensors(path);
  for (const ParamSpec& s : params.specs()) {
    auto it = w.tensors.find(s.name);
    MNEMO_CHECK(it != w.tensors.end()) << what << " " << path << " has no tensor '" << s.name << "' (see docs/FORMATS.md)";
    MNEMO_CHECK(it->second.type() == params.at(s.name).type())
        << what << " " << path << ": '" << s.name << "' is " << it->second.type().str() << ", the model needs "
        << params.at(s.name).type().str();
  }
  MNEMO_CHECK(w.tensors.size() == params.specs().size()) << what << " " << path << " holds " << w.tensors.size()
                                                         << " tensors, the model has " << params.specs().size() << " parameters";
  check_state_finite(params.specs(), w.tensors, std::string(what) + " " + path);
  for (const ParamSpec& s : params.specs()) {
    const Tensor& t = w.tensors.at(s.name);
    std::memcpy(params.at(s.name).data(), t.data(), t.bytes());
  }
}

// What a checkpoint's data_position counts (TrainState::data_order).
std::string data_order(const Config& c, const DataSource& train) {
  return "batches of " + std::to_string(c.data.batch) + " from " + std::to_string(train.size()) + " " + c.data.source + " examples";
}

// The trainer: one BoundStep on the run's device, the loader preparing the next batch while the
// step runs (on a GPU uploaded into a staging buffer; on the host read in place), an evaluator in
// the step's arena, checkpoints.
int ranks_of(const RunCommunicator* comm) { return comm ? comm->size() : 1; }
// Whether the run's step all-reduces its gradients: several ranks, or one with
// parallel.reduce_one_rank.
bool data_parallel(const RunCommunicator* comm, const Config& c) { return comm && (comm->size() > 1 || c.parallel.reduce_one_rank); }
int rank_of(const RunCommunicator* comm) { return comm ? comm->rank() : 0; }

class Trainer {
 public:
  // `comm`: the run's communicator when mpirun started it (data parallelism) or the config keeps the
  // reduction path with one rank (parallel.reduce_one_rank), else null.
  Trainer(const TrainOptions& opt, Config& c, RunCommunicator* comm);
  int run();

 private:
  void print_progress(double loss, double lr, double rate);
  void checkpoint(const std::string& path);
  Evaluator::Result evaluate();
  nlohmann::json eval_record(const Evaluator::Result& er) const;
  void print_profile(int64_t steps) const;

  Clock::time_point created_ = Clock::now();  // first member: setup time counts from here
  const TrainOptions& opt_;
  Config& c_;
  RunCommunicator* comm_;
  int rank_, ranks_;  // this process's rank and the run's rank count (1 without mpirun)
  bool dp_;  // data_parallel(comm, c)
  std::shared_ptr<const DataSource> train_, test_;
  DataShape ds_;
  Pipeline p_;
  std::unique_ptr<Device> device_;
  int64_t rss0_ = 0;      // before anything large is allocated (parameters, arena)
  MirrorResult planned_;  // checked against the device's memory before the stores below exist
  int64_t plan_peak_ = 0;  // peak RSS growth up to the end of planning
  int64_t rss_run0_ = -1;  // RSS after planning, the peak mark reset to it (-1: could not reset)
  int64_t code_run0_ = code_rss_bytes();  // its executable part (libraries' text, JIT kernels)
  ParamStore params_;
  Sgd sgd_;
  BatchLoader loader_;
  int64_t total_ = 0;
  TrainState state_;
  std::unique_ptr<BoundStep> step_;
  std::unique_ptr<Evaluator> evaluator_;
  std::unique_ptr<MetricsLog> metrics_;
  Tensor x_, y_;
  std::vector<TensorView> next_;   // the next batch, staged on the device
  bool staged_ = false;            // the loader has handed out the staged batch
  int64_t device_peak_ = 0;        // memory in use, sampled after steps and evaluations
  bool tty_ = false;
  // The step log's running mean of the loss; NaN before the first step (and a checkpoint's own).
  double loss_ema_ = std::numeric_limits<double>::quiet_NaN();
  double last_loss_ = 0;
  int64_t first_ = 0;
};

// Batches a run holds besides the plan's inputs: on the host the data loader's batch prepared
// ahead (the current one is bound as the step's input: two buffers circulate); on a GPU the two
// staging buffers.
int64_t staged_batches(const Device& d) { return d.host_memory() ? 1 : 2; }

Trainer::Trainer(const TrainOptions& opt, Config& c, RunCommunicator* comm)
    : opt_(opt), c_(c), comm_(comm), rank_(rank_of(comm)), ranks_(ranks_of(comm)), dp_(data_parallel(comm, c)),
      train_(make_source(c, Split::train)), ds_(data_shape_of(c, *train_)), p_(build_pipeline(c, ds_, c.data.batch / ranks_, ranks_, dp_, rank_)), device_(open_run_device(c, opt.device)), rss0_(peak_rss_bytes()),
      planned_(plan_step(c, p_, *device_, true, opt.force, batch_bytes(p_, staged_batches(*device_)))),
      plan_peak_(peak_rss_bytes() - rss0_), rss_run0_(reset_peak_rss()),
      params_(p_.model.builder.graph(), p_.model.builder.params(), c.run.seed),
      sgd_(params_, {c.optimizer.lr, c.optimizer.momentum, c.optimizer.weight_decay}),
      loader_(train_, c.data.batch / ranks_, true, c.run.seed, time_major(c), rank_, ranks_) {
  int64_t from_epochs = 0;
  if (!opt.steps && !c.run.steps) {
    MNEMO_CHECK(!__builtin_mul_overflow(c.run.epochs, loader_.batches_per_epoch(), &from_epochs) && from_epochs <= kMaxSteps)
        << c.file << ": train.epochs " << c.run.epochs << " x " << loader_.batches_per_epoch()
        << " batches per epoch is more than " << kMaxSteps << " steps";
  }
  total_ = opt.steps ? opt.steps : c.run.steps ? c.run.steps : from_epochs;
  // Every file the run needs is opened and validated now, not after hours of training.
  if (c.data.eval && (opt.eval || c.run.eval_every)) test_ = make_source(c, Split::test);
  state_ = TrainState{};
  state_.seed = c.run.seed;
  if (!opt.init.empty()) {
    load_weights(opt.init, "--init", params_);
    std::printf("initial weights from %s\n", opt.init.c_str());
  }
  // What this run's checkpoints record: the data its position counts, and its optimiser and schedule.
  const std::string order = data_order(c, *train_), training = describe_training(c.optimizer, c.schedule, total_);
  if (!opt.resume.empty()) {
    state_ = load_checkpoint(opt.resume, params_, sgd_);
    MNEMO_CHECK(state_.seed == c.run.seed) << "checkpoint " << opt.resume << " was made with train.seed " << state_.seed
                                           << ", the config has " << c.run.seed;
    MNEMO_CHECK(state_.data_order.empty() || state_.data_order == order)
        << "checkpoint " << opt.resume << " was saved reading " << state_.data_order << "; this run reads " << order
        << ": its data position (" << state_.data_position << " batches) would point elsewhere in the data; resume with the "
        << "data settings it was saved with";
    if (!state_.training.empty() && state_.training != training)
      std::printf("note: checkpoint %s was training with %s; this run trains with %s (its learning rate and update "
                  "apply from step %lld on)\n",
                  opt.resume.c_str(), state_.training.c_str(), training.c_str(), static_cast<long long>(state_.step + 1));
    loss_ema_ = state_.loss_ema;  // (NaN in older checkpoints: the average starts again)
    if (state_.data_order.empty())  // (saved before checkpoints recorded it: nothing to check against)
      std::printf("note: checkpoint %s does not record the data it was saved reading (an older checkpoint): its data "
                  "position (%lld batches) is taken as counting this run's %s\n",
                  opt.resume.c_str(), static_cast<long long>(state_.data_position), order.c_str());
    loader_.seek(state_.data_position);
    std::printf("resumed from %s at step %lld\n", opt.resume.c_str(), static_cast<long long>(state_.step));
  }
  state_.data_order = order, state_.training = training;
  // On a GPU the step is captured once and replayed, a data-parallel one too: its NCCL gathers on
  // their own stream join the capture through the events that order them (docs/PARALLEL.md).
  step_ = std::make_unique<BoundStep>(std::move(planned_), p_, params_, &sgd_, *device_, !opt.eager);
  const TensorType io[2] = {step_->input_type(p_.model.data), step_->input_type(p_.model.labels)};
  // On a GPU double-buffered: the next batch uploads while this step runs. A host step reads the
  // loader's batch in place (no copy): it has ended when run() returns, before the loader takes
  // that batch's buffer back.
  if (!device_->host_memory()) device_->reserve_inputs(io, 2);
  step_->executor().set_profiling(opt.profile);
  step_->set_replay(!dp_);
  if (dp_ && comm_->device()) {
    // The step's NCCL gathers wait on the device for every rank: a rank that died or hangs would
    // leave this one waiting in the device forever. Bounded like the host's collectives.
    device_->limit_waits(c.parallel.timeout_s, "rank " + std::to_string(rank_) + " of " + std::to_string(ranks_),
                         [comm = comm_](const std::string& why) { comm->abandon(why); });
  }
  if (dp_) {
    // Every rank must issue the same gathers in the same order (exact in doubles: 24-bit values).
    const double f = static_cast<double>(gather_fingerprint(step_->training()));
    const std::vector<double> s = comm_->sum({f, f * f}, "the plans' comparison");
    MNEMO_CHECK(s[0] == ranks_ * f && s[1] == ranks_ * f * f)
        << "rank " << rank_ << ": the ranks planned different gradient all-reduces (bucket sequences differ): a "
        << "time-limited solver (order: optimal, or budget=...:exact) chose another step on some rank; use an "
        << "order and memory mode without a time limit for data parallelism (docs/PARALLEL.md)";
  }
  // Rank 0 writes what one process would (metrics, checkpoints); every rank trains.
  // (Not opened when there is nothing to train: opening cuts it back to the checkpoint's step.)
  if (!c.run.metrics.empty() && rank_ == 0 && state_.step < total_) metrics_ = std::make_unique<MetricsLog>(c.run.metrics, state_.step);
  if (!c.checkpoint.dir.empty() && rank_ == 0) {
    std::error_code ec;
    MNEMO_CHECK(!std::filesystem::exists(c.checkpoint.dir, ec) || std::filesystem::is_directory(c.checkpoint.dir, ec))
        << c.file << ": checkpoint.dir '" << c.checkpoint.dir << "' exists and is not a directory";
    std::filesystem::create_directories(c.checkpoint.dir, ec);
    MNEMO_CHECK(!ec) << c.file << ": checkpoint.dir '" << c.checkpoint.dir << "': cannot create it: " << ec.message();
  }
  if (rank_ == 0) {
    // Where the run will save, checked now: not after hours of training (a directory given to
    // --checkpoint was refused only at the end, the run's weights unsaved).
    auto check_out = [](const std::string& path, const std::string& what) {
      std::filesystem::path dir = std::filesystem::path(writable_target(path, what)).parent_path();
      if (dir.empty()) dir = ".";
      MNEMO_CHECK(std::filesystem::is_directory(dir) && ::access(dir.c_str(), W_OK) == 0)
          << what << ": cannot write '" << path << "': the directory '" << dir.string() << "' does not exist or is not writable";
    };
    if (!opt.checkpoint.empty()) check_out(opt.checkpoint, "--checkpoint " + opt.checkpoint);
    if (!c.checkpoint.dir.empty()) check_out(c.checkpoint.dir + "/checkpoint.safetensors", c.file + ": checkpoint.dir");
  }
  // A progress bar on a terminal, log lines otherwise; under mpirun always log lines (Open MPI
  // gives the ranks a pseudo-terminal even when the output goes to a file).
  tty_ = isatty(STDOUT_FILENO) && !comm;
}

void Trainer::checkpoint(const std::string& path) {
  if (rank_ != 0) return;  // the ranks hold the same parameters: rank 0 saves them
  state_.data_position = loader_.position() - (staged_ ? 1 : 0);
  state_.loss_ema = loss_ema_;
  step_->params().download();
  save_checkpoint(path, params_, sgd_, state_, opt_.config);
}

Evaluator::Result Trainer::evaluate() {
  if (!evaluator_)
    evaluator_ = std::make_unique<Evaluator>(c_, ds_, *device_, step_->params(), step_->executor(), !opt_.eager);
  Evaluator::Result er = evaluator_->run(*test_);
  device_peak_ = std::max(device_peak_, device_->memory_in_use());
  // The training step's checks cover its loss and gradients, not what only evaluation reads.
  MNEMO_CHECK(!er.loss_examples || std::isfinite(er.loss)) << "evaluation after step " << state_.step << ": the test loss is "
                                      << (std::isnan(er.loss) ? "nan" : er.loss > 0 ? "inf" : "-inf") << " (accuracy "
                                      << 100 * er.accuracy << "% on " << er.examples
                                      << " examples): a weight or a running statistic is not finite";
  return er;
}

// The metrics record of an evaluation: the loss over the examples of full batches (null when none).
nlohmann::json Trainer::eval_record(const Evaluator::Result& er) const {
  return {{"step", state_.step}, {"test_accuracy", er.accuracy}, {"test_examples", er.examples}, {"test_loss", er.loss},
          {"test_loss_examples", er.loss_examples}};
}

void Trainer::print_progress(double loss, double lr, double rate) {
  const double eta = (total_ - state_.step) / rate;
  const long long step = state_.step, total = total_;
  if (tty_) {
    const int width = 30, done = static_cast<int>(width * state_.step / total_);
    std::printf("\r[%.*s%*s] %lld/%lld loss %.4f (avg %.4f) lr %.4g %.2f it/s %.0f ex/s ETA %s   ", done, "##############################",
                width - done, "", step, total, loss, loss_ema_, lr, rate, rate * c_.data.batch, hms(eta).c_str());
    std::fflush(stdout);
  } else if (state_.step % c_.run.log_every == 0 || state_.step == total_) {
    std::printf("step %lld/%lld epoch %.2f loss %.4f (avg %.4f) lr %.4g %.2f steps/s %.0f examples/s eta %s\n", step, total,
                static_cast<double>(state_.step) / loader_.batches_per_epoch(), loss, loss_ema_, lr, rate, rate * c_.data.batch,
                hms(eta).c_str());
  }
}

void Trainer::print_profile(int64_t steps) const {
  const Executor& ex = step_->executor();
  const Graph& g = step_->training().graph;
  std::map<std::string, double> by_op;
  for (size_t v = 0; v < ex.profile().size(); ++v) by_op[g.node(static_cast<int>(v)).op->name] += ex.profile()[v];
  std::vector<std::pair<double, std::string>> rows;
  double sum = 0;
  for (const auto& [op, t] : by_op) rows.push_back({t, op}), sum += t;
  std::sort(rows.rbegin(), rows.rend());
  // (The run's first step is left out when there are more: its one-off costs, the kernels' first
  // calls and first touches of memory, were most of a small model's profile: 21 ms of one op.)
  // (the loop restarts the profile after the first step when there are more)
  const bool first_left_out = steps > 1;
  if (first_left_out) steps -= 1;
  std::printf("profile (%lld step%s%s, %.3f s/step in kernels):\n", static_cast<long long>(steps), steps == 1 ? "" : "s",
              first_left_out ? " after the run's first, whose one-off costs are left out" : ", the first with its one-off costs",
              sum / std::max<int64_t>(1, steps));
  for (const auto& [t, op] : rows)
    if (t > 0) std::printf("  %-28s %8.2f ms/step %5.1f%%\n", op.c_str(), 1000 * t / steps, 100 * t / sum);
}

int Trainer::run() {
  const PlannedStep& ps = step_->result().planned;
  const std::string where = device_->name();
  std::printf("mnemo train %s: %s%s, %d layers, %zu training nodes, batch %lld, %s, %lld steps (%lld per epoch)\n",
              opt_.config.c_str(), c_.model_type.c_str(), p_.model.report_note().c_str(), p_.model.layers, step_->training().graph.size(),
              static_cast<long long>(c_.data.batch), where.c_str(), static_cast<long long>(total_),
              static_cast<long long>(loader_.batches_per_epoch()));
  // The loader's batches are full: what does not fill the last one of an epoch is left out (other
  // examples each epoch when shuffled, as PyTorch's drop_last).
  const int64_t left_out = train_->size() - loader_.batches_per_epoch() * c_.data.batch;
  if (left_out > 0)
    std::printf("  each epoch leaves %lld of its %lld shuffled training examples out (batches are full: %lld x %lld)\n",
                static_cast<long long>(left_out), static_cast<long long>(train_->size()),
                static_cast<long long>(loader_.batches_per_epoch()), static_cast<long long>(c_.data.batch));
  print_report(ps.report, step_->executor().allocated_bytes(), "");
  if (dp_ && ranks_ == 1)
    std::printf("data parallel: 1 rank (parallel.reduce_one_rank: the all-reduce path kept to measure it), gradients "
                "averaged in %s\n", describe_buckets(step_->training(), c_.parallel.bucket_bytes).c_str());
  else if (dp_)
    std::printf("data parallel: %d ranks (mpirun), batch %lld per rank, gradients averaged in %s, overlapping the backward pass\n",
                ranks_, static_cast<long long>(c_.data.batch / ranks_), describe_buckets(step_->training(), c_.parallel.bucket_bytes).c_str());

  // A host step reads the loader's batch in place; a GPU step an upload of it.
  const bool host = device_->host_memory();
  auto stage_next = [&] {
    loader_.next(x_, y_);
    const TensorView views[2] = {x_.view(), y_.view()};
    next_ = host ? std::vector<TensorView>(views, views + 2) : device_->stage_inputs(views);
    staged_ = true;
  };
  const auto t0 = Clock::now();
  const double setup_s = std::chrono::duration<double>(t0 - created_).count();
  first_ = state_.step;
  int64_t saved_at = -1;
  if (state_.step < total_) stage_next();
  while (state_.step < total_) {
    const double lr = learning_rate(c_.optimizer, c_.schedule, state_.step, total_);
    // Enqueue the step (its updates included), then take and upload the next batch while the
    // device computes; reading the loss and status waits for this step only. A host step reads
    // the loader's batch in place and has ended when run() returns: the loader gets that batch's
    // buffer back only after the loss and status are read (a non-finite one replays the step on
    // the same input to name where it began), so its next batch is taken below.
    step_->bind(next_[0], next_[1]);
    staged_ = false;
    step_->set_lr(lr);
    step_->set_step(state_.step);  // dropout masks: a function of the global step (resume draws the same)
    step_->run();
    if (!host && state_.step + 1 < total_) stage_next();
    double loss = 0;
    char what[64];
    std::snprintf(what, sizeof what, "step %lld (lr %g)", static_cast<long long>(state_.step + 1), lr);
    std::string failed;
    try {
      loss = step_->finish(what);
    } catch (const Error& e) {
      if (dp_ && comm_->broken()) throw;  // a timeout: no collective can run any more (the message names the rank)
      failed = e.what();
    }
    if (dp_) {
      // Every rank learns whether any failed (so all stop together) and the loss of the global
      // batch (the mean of the ranks' losses: equal shares).
      const std::vector<double> sums = comm_->sum({failed.empty() ? loss : 0.0, failed.empty() ? 0.0 : 1.0}, std::string("the loss of ") + what);
      if (sums[1] > 0 && failed.empty())
        failed = std::string(what) + ": " + std::to_string(static_cast<int>(sums[1])) + " other rank(s) met a NaN or Inf (their messages name it)";
      else if (!failed.empty())
        failed = "rank " + std::to_string(rank_) + ": " + failed;
      loss = sums[0] / ranks_;
    }
    if (!failed.empty()) {
      if (tty_) std::printf("\n");
      // Nothing below runs: no checkpoint, no metrics line for this step.
      MNEMO_FAIL() << failed << ". Training diverged or the data or weights hold NaN/Inf: lower optimizer.lr or add "
                   << "warm-up if the loss grew before"
                   << (host ? "" : "; on a GPU a label outside [0, classes) also gives a NaN loss")
                   << ". Nothing was saved: the last checkpoint is unchanged.";
    }
    if (host && state_.step + 1 < total_) stage_next();
    if (state_.step - first_ < 3 || (state_.step + 1) % 50 == 0) device_peak_ = std::max(device_peak_, device_->memory_in_use());
    ++state_.step;
    if (opt_.profile && state_.step - first_ == 1 && state_.step < total_) step_->executor().set_profiling(true);
    last_loss_ = loss;
    loss_ema_ = std::isnan(loss_ema_) ? loss : 0.95 * loss_ema_ + 0.05 * loss;  // (continued from a checkpoint's)
    const double rate = (state_.step - first_) / seconds_since(t0);
    if (metrics_)
      metrics_->write({{"step", state_.step}, {"epoch", static_cast<double>(state_.step) / loader_.batches_per_epoch()},
                       {"loss", loss}, {"lr", lr}, {"steps_per_s", rate}, {"examples_per_s", rate * c_.data.batch}});
    print_progress(loss, lr, rate);
    // An evaluation due at this step runs before its checkpoint: a run killed during the
    // evaluation resumes from the checkpoint before and evaluates again (the other way round its
    // metrics record was lost: the checkpoint said the step was done). The last step's evaluation
    // and checkpoint come after the loop, in the same order.
    if (c_.run.eval_every && state_.step % c_.run.eval_every == 0 && state_.step < total_ && c_.data.eval && rank_ == 0) {
      const Evaluator::Result er = evaluate();
      if (tty_) std::printf("\n");
      std::printf("eval at step %lld: test accuracy %.2f%% (%lld examples)\n", static_cast<long long>(state_.step),
                  100 * er.accuracy, static_cast<long long>(er.examples));
      if (metrics_) metrics_->write(eval_record(er));
    }
    if (!c_.checkpoint.dir.empty() && c_.checkpoint.every && state_.step % c_.checkpoint.every == 0 && state_.step < total_) {
      checkpoint(c_.checkpoint.dir + "/checkpoint.safetensors");
      saved_at = state_.step;
    }
  }
  if (tty_) std::printf("\n");
  const double train_s = seconds_since(t0);
  const int64_t steps = state_.step - first_;
  if (opt_.profile && steps > 0) print_profile(steps);
  if (steps > 0) {
    const double final_loss = last_loss_;  // (with several ranks: the global batch's)
    std::printf("trained %lld steps in %.1f min (%.4f s/step); final loss %.4f (avg %.4f)\n", static_cast<long long>(steps),
                train_s / 60, train_s / steps, final_loss, loss_ema_);
  } else {
    // A run with nothing to do writes nothing: rewriting checkpoint.dir's checkpoint or --checkpoint
    // with the state resumed from would put an older state over a newer one, and the metrics file
    // is left as it is (not cut back to the checkpoint's step, no evaluation record added).
    std::printf("nothing to train: already at step %lld of %lld (no checkpoint or metrics written)\n",
                static_cast<long long>(state_.step), static_cast<long long>(total_));
  }
  if (dp_ && steps > 0) {
    // Every rank's communication time (gathers on its MPI thread; waits in its step), averaged.
    const RunCommunicator::Stats st = comm_->stats();
    const std::vector<double> sums = comm_->sum({st.gather_s, st.waited_s, static_cast<double>(st.gathers)}, "the communication times");
    const double gather = sums[0] / ranks_ / steps, waited = sums[1] / ranks_ / steps;
    std::printf("communication: %.0f gradient gathers per step; per rank and step %.4f s of gathers, %.4f s of them waited "
                "for: %.1f%% hidden behind the backward pass (train time %.4f s/step)\n",
                sums[2] / ranks_ / steps, gather, waited, gather > 0 ? 100.0 * std::max(0.0, 1.0 - waited / gather) : 100.0,
                train_s / steps);
  }
  if (opt_.eval && c_.data.eval && rank_ == 0) {
    const auto te = Clock::now();
    const Evaluator::Result er = evaluate();
    char loss[96];
    if (er.loss_examples == er.examples) std::snprintf(loss, sizeof loss, "test loss %.4f", er.loss);
    else if (er.loss_examples) std::snprintf(loss, sizeof loss, "test loss %.4f on the first %lld, in full batches of %lld", er.loss,
                                            static_cast<long long>(er.loss_examples), static_cast<long long>(evaluator_->batch()));
    else std::snprintf(loss, sizeof loss, "test loss not measured: no full batch of %lld", static_cast<long long>(evaluator_->batch()));
    std::printf("test accuracy %.2f%% on %lld examples (%s, %.1f s)\n", 100 * er.accuracy, static_cast<long long>(er.examples), loss,
                seconds_since(te));
    if (metrics_) metrics_->write(eval_record(er));
  }
  // The last checkpoints, after the last evaluation (see the loop).
  if (steps > 0 && !c_.checkpoint.dir.empty() && saved_at != state_.step) checkpoint(c_.checkpoint.dir + "/checkpoint.safetensors");
  if (steps > 0 && !opt_.checkpoint.empty()) checkpoint(opt_.checkpoint);
  print_report(ps.report, step_->executor().allocated_bytes(), "");
  if (evaluator_) std::printf("  evaluation ran %s\n", evaluator_->borrows_arena() ? "in the training arena" : "in an arena of its own (the training arena is smaller)");
  if (!device_->host_memory()) {
    print_device_memory(*device_, ps.report, step_->params().bytes(), std::max(device_peak_, device_->memory_in_use()));
    const int captures = step_->executor().captures();
    std::printf("  the step ran as %s\n", captures ? (std::to_string(captures) + " captured graph(s), replayed").c_str()
                                                   : "kernel launches node by node");
  } else {
    if (rss_run0_ >= 0) {
      // The peak is data and code together; code only grows (pages stay mapped), so the data at the
      // peak is at least the peak minus the code now: exact when the code stopped growing before the
      // peak (the kernels are prepared and the libraries paged in by the first step).
      const int64_t grew = std::max<int64_t>(0, peak_rss_bytes() - rss_run0_);
      const int64_t code = std::max<int64_t>(0, code_rss_bytes() - code_run0_);
      const int64_t data = std::max<int64_t>(0, grew - code);
      const double total = static_cast<double>(std::max<int64_t>(1, ps.report.total_bytes));
      std::printf("  measured: arena %s allocated by the executor; peak RSS grew %s after planning (%.2fx the planned "
                  "total): code paged in %s (the libraries' text, oneDNN's JIT kernels), data %s (%.2fx the planned "
                  "total; besides the plan, the data loader's batch prepared ahead, %s); the planner's own peak "
                  "was %s above the start; setup took %.1f s\n",
                  format_bytes(step_->executor().allocated_bytes()).c_str(), format_bytes(grew).c_str(),
                  static_cast<double>(grew) / total, format_bytes(code).c_str(), format_bytes(data).c_str(),
                  static_cast<double>(data) / total, format_bytes(batch_bytes(p_, 1)).c_str(),
                  format_bytes(std::max<int64_t>(0, plan_peak_)).c_str(), setup_s);
    } else {
      std::printf("  measured: arena %s allocated by the executor; peak RSS grew %s during the run, planning included "
                  "(the peak mark could not be reset; setup took %.1f s)\n",
                  format_bytes(step_->executor().allocated_bytes()).c_str(),
                  format_bytes(std::max<int64_t>(0, peak_rss_bytes() - rss0_)).c_str(), setup_s);
    }
  }
  return 0;
}

}  // namespace

void use_config_threads(const Config& c) {
  if (c.run.threads > 0) omp_set_num_threads(c.run.threads);
}

int run_train(const TrainOptions& opt) {
  Config c = load_config(opt.config);
  // No output may be an input or another output (a typo'd path would destroy the config or the
  // weights). Resuming from --checkpoint's own file is allowed: the run continues and replaces it.
  const std::vector<std::pair<std::string, std::string>> read{{"the config", opt.config}, {"--init", opt.init}};
  const std::string in_dir = c.checkpoint.dir.empty() ? "" : c.checkpoint.dir + "/checkpoint.safetensors";
  check_not_the_same_file(opt.save_init, "--save-init", {read[0], read[1], {"--resume", opt.resume}, {"train.metrics", c.run.metrics},
                                                          {c.file + ": checkpoint.dir's checkpoint", in_dir}});
  check_not_the_same_file(opt.checkpoint, "--checkpoint", {read[0], read[1], {"train.metrics", c.run.metrics}});
  check_not_the_same_file(in_dir, c.file + ": checkpoint.dir's checkpoint", {read[0], read[1], {"train.metrics", c.run.metrics}});
  check_not_the_same_file(c.run.metrics, c.file + ": train.metrics", {read[0], read[1], {"--resume", opt.resume}});
  if (!opt.memory.empty()) c.memory = opt.memory;
  if (!opt.order.empty()) c.order = opt.order;
  if (opt.placement_seconds >= 0) c.placement_seconds = opt.placement_seconds;
  if (!opt.device.empty()) c.device = opt.device;
  parse_memory_mode(c.memory);  // a bad mode fails before any work
  use_config_threads(c);
  MNEMO_CHECK(opt.init.empty() || opt.resume.empty()) << "--init and --resume exclude each other (a checkpoint holds the weights)";
  if (!opt.save_init.empty()) {
    // Writes the weights the run would start from, and trains nothing: the config's
    // initialisation, or --init's or --resume's weights (a checkpoint's weights as a weights file).
    MNEMO_CHECK(opt.checkpoint.empty() && !opt.steps)
        << "--save-init writes the weights a run would start from and trains nothing: --checkpoint and --steps do not apply";
    // Under mpirun every rank would write the same file: rank 0 does (the weights are the same).
    if (const char* r = std::getenv("OMPI_COMM_WORLD_RANK"); r && std::string(r) != "0") return 0;
    std::shared_ptr<const DataSource> train = make_source(c, Split::train);
    const Pipeline p = build_pipeline(c, data_shape_of(c, *train), c.data.batch);
    ParamStore params(p.model.builder.graph(), p.model.builder.params(), c.run.seed);
    std::string from = "the initial weights";
    if (!opt.init.empty()) load_weights(opt.init, "--init", params), from = "the weights of --init " + opt.init;
    if (!opt.resume.empty()) {
      Sgd sgd(params, {c.optimizer.lr, c.optimizer.momentum, c.optimizer.weight_decay});
      const TrainState st = load_checkpoint(opt.resume, params, sgd);
      from = "the weights of checkpoint " + opt.resume + " (step " + std::to_string(st.step) + ")";
    }
    std::vector<std::pair<std::string, TensorView>> ts;
    for (const ParamSpec& s : params.specs()) ts.push_back({s.name, params.at(s.name).view()});
    write_safetensors(opt.save_init, ts, {{"format", "mnemo-weights-1"}, {"config", opt.config}});
    std::printf("wrote %s (%zu tensors) to %s\n", from.c_str(), ts.size(), opt.save_init.c_str());
    return 0;
  }
  // Data parallelism: mpirun started this process (docs/PARALLEL.md); or one rank without MPI,
  // to measure the reduction path (parallel.reduce_one_rank).
  std::unique_ptr<RunCommunicator> comm = MpiCommunicator::open_if_launched(c.parallel.timeout_s);
  if (!comm && c.parallel.reduce_one_rank) comm = std::make_unique<OneRankCommunicator>();
  struct Installed {  // the kernels reach the communicator while the trainer runs
    explicit Installed(Communicator* c) { set_communicator(c); }
    ~Installed() { set_communicator(nullptr); }
  } installed(comm.get());
  if (data_parallel(comm.get(), c)) {
    const int n = comm->size();
    MNEMO_CHECK(c.data.batch % n == 0) << c.file << ": data.batch " << c.data.batch << " does not divide over the " << n
                                       << " ranks of this run (mpirun -np " << n << "): use a multiple of " << n
                                       << " (data.batch is the global batch; each rank takes an equal share)";
    if (is_cuda_device(c.device)) {
#ifdef MNEMO_HAVE_NCCL
      // One rank per GPU: plain `cuda` means the GPU of the rank's index on its machine.
      if (c.device == "cuda") {
        const char* local = std::getenv("OMPI_COMM_WORLD_LOCAL_RANK");
        c.device = std::string("cuda:") + (local ? local : "0");
      }
      const int ordinal = cuda_ordinal(c.device, opt.device.empty() ? c.file + ": device" : std::string("--device"));
      std::string id = comm->rank() == 0 ? cuda::nccl_unique_id() : std::string();
      id = comm->broadcast(id, "the NCCL unique id");
      try {
        comm->attach_device(cuda::open_nccl(id, comm->rank(), n, ordinal));
      } catch (const Error& e) {
        MNEMO_FAIL() << "rank " << comm->rank() << " of " << n << ": opening NCCL on " << c.device << ": " << e.what();
      }
#else
      MNEMO_FAIL() << c.file << ": data parallelism on a GPU needs NCCL, which this build does not have (docs/PARALLEL.md)";
#endif
    }
    if (comm->rank() != 0) {  // rank 0 prints for the run
      MNEMO_CHECK(std::freopen("/dev/null", "w", stdout)) << "rank " << comm->rank() << ": cannot silence stdout";
    }
  }
  Trainer t(opt, c, comm.get());
  return t.run();
}

int run_grad(const GradOptions& opt) {
  Config c = load_config(opt.config);
  check_not_the_same_file(opt.out, "--out", {{"the config", opt.config}, {"--weights", opt.weights}, {"--batch", opt.batch}});
  if (!opt.device.empty()) c.device = opt.device;  // (the model's layout depends on it)
  use_config_threads(c);
  TensorFile batch = read_safetensors(opt.batch);
  for (const char* k : {"data", "labels"})
    MNEMO_CHECK(batch.tensors.count(k)) << "batch file " << opt.batch << " has no tensor '" << k << "' (it needs 'data' and 'labels')";
  const Tensor& x = batch.tensors.at("data");
  const Tensor& y = batch.tensors.at("labels");
  const bool tm = time_major(c);
  MNEMO_CHECK(x.shape().size() >= 2) << "batch file " << opt.batch << ": 'data' is " << x.type().str()
                                     << ", expected a batch of samples (rank 2 or more)";
  const int64_t n = x.shape()[tm ? 1 : 0];
  const DataShape ds = c.data.source == "text" ? data_shape_of(c, *make_source(c, Split::train)) : static_data_shape(c);
  Pipeline p = build_pipeline(c, ds, n);
  const Graph& fwd = p.model.builder.graph();
  if (!opt.memory.empty()) c.memory = opt.memory;
  if (!opt.order.empty()) c.order = opt.order;
  std::unique_ptr<Device> device = open_run_device(c, opt.device);
  MirrorResult planned = plan_step(c, p, *device, false, opt.force, batch_bytes(p, 1));
  ParamStore params(fwd, p.model.builder.params(), c.run.seed);
  load_weights(opt.weights, "weights file", params);
  BoundStep step(std::move(planned), p, params, nullptr, *device);
  step.bind_host(x, y);
  step.run();
  // Host copies of the loss and every gradient; nothing is written unless all are finite.
  std::vector<Tensor> host;
  host.push_back(step.executor().fetch(step.training().loss));
  std::vector<std::pair<std::string, TensorView>> out{{"loss", host.back().view()}};
  for (const ParamGrad& g : step.training().grads) {
    host.push_back(step.executor().fetch(g.grad));
    out.push_back({"grad/" + fwd.node(g.param).name, host.back().view()});
  }
  for (size_t i = 0; i < out.size(); ++i) {
    const Tensor& t = host[i];
    for (int64_t k = 0; k < t.numel(); ++k)
      if (!std::isfinite(t.as<float>()[k]))
        step.fail_non_finite("the " + (i ? "gradient '" + out[i].first + "'" : std::string("loss")) + " is not finite (element " +
                             std::to_string(k) + " = " + std::to_string(t.as<float>()[k]) + "); " + opt.out + " was not written");
  }
  write_safetensors(opt.out, out, {{"format", "mnemo-grad-1"}, {"config", opt.config}});
  std::printf("loss %.6f; wrote the loss and %zu gradients to %s (computed on %s)\n", host[0].as<float>()[0], out.size() - 1,
              opt.out.c_str(), device->name().c_str());
  return 0;
}

int run_bench(const BenchOptions& opt) {
  Config c = load_config(opt.config);
  if (!opt.device.empty()) c.device = opt.device;  // (the model's layout depends on it)
  if (!opt.memory.empty()) c.memory = opt.memory;
  if (!opt.order.empty()) c.order = opt.order;
  if (opt.placement_seconds >= 0) c.placement_seconds = opt.placement_seconds;
  if (opt.batch) set_batch(c, opt.batch);
  use_config_threads(c);
  const DataShape ds = c.data.source == "text" ? data_shape_of(c, *make_source(c, Split::train)) : static_data_shape(c);
  Pipeline p = build_pipeline(c, ds, c.data.batch);
  std::unique_ptr<Device> device = open_run_device(c, opt.device);
  MirrorResult planned = plan_step(c, p, *device, true, opt.force, batch_bytes(p, 2));
  ParamStore params(p.model.builder.graph(), p.model.builder.params(), c.run.seed);
  Sgd sgd(params, {c.optimizer.lr, c.optimizer.momentum, c.optimizer.weight_decay});
  BoundStep step(std::move(planned), p, params, &sgd, *device, !opt.eager);
  const PlannedStep& ps = step.result().planned;
  Tensor x(step.input_type(p.model.data)), y(step.input_type(p.model.labels));
  // Inputs drawn once: the step time does not depend on their values.
  uint64_t s = 12345;
  for (int64_t i = 0; i < x.numel(); ++i) x.as<float>()[i] = static_cast<float>((splitmix64(s) >> 40) * 0x1.0p-24 * 2.0 - 1.0);
  for (int64_t i = 0; i < y.numel(); ++i) y.as<int32_t>()[i] = static_cast<int32_t>(splitmix64(s) % static_cast<uint64_t>(ds.classes));
  step.bind_host(x, y);
  step.set_lr(1e-3);
  std::vector<double> times;
  int64_t device_peak = 0;
  for (int i = 0; i < opt.warmup + opt.steps; ++i) {
    step.set_step(i);
    const auto t0 = Clock::now();
    step.run();
    const double loss = step.finish("bench step " + std::to_string(i + 1));  // waits for the device
    (void)loss;
    if (i >= opt.warmup) times.push_back(seconds_since(t0));
    device_peak = std::max(device_peak, device->memory_in_use());  // outside the timed region
  }
  const double median_s = median(times);
  std::sort(times.begin(), times.end());
  const MemoryReport& r = ps.report;
  const bool gpu = !device->host_memory();
  if (opt.json) {
    nlohmann::json j = to_json(r);
    j["config"] = opt.config;
    j["batch"] = c.data.batch;
    j["threads"] = omp_get_max_threads();
    j["device"] = gpu ? device->name() : "cpu";
    j["layout"] = p.model.layout_name();
    if (!p.model.head.empty()) j["head"] = p.model.head;
    j["captured_graphs"] = step.executor().captures();
    if (gpu) {
      j["device_allocated_bytes"] = device->allocated_bytes();
      j["device_peak_in_use_bytes"] = device_peak;
      j["device_in_use_at_open_bytes"] = device->memory_at_open();
      j["device_measured_bytes"] = device_peak - device->memory_at_open();
    }
    j["step_seconds_median"] = median_s;
    j["step_seconds_min"] = times.front();
    j["step_seconds_max"] = times.back();
    j["steps"] = opt.steps;
    std::printf("%s\n", j.dump().c_str());
  } else {
    std::printf("%s: %s%s batch %lld, %s, mode %s: median %.4f s/step (min %.4f, max %.4f over %d steps), %.1f examples/s; "
                "feature maps %s, total %s\n",
                opt.config.c_str(), c.model_type.c_str(), p.model.report_note().c_str(), static_cast<long long>(c.data.batch), device->name().c_str(), r.mode.c_str(),
                median_s, times.front(), times.back(), opt.steps, c.data.batch / median_s, format_bytes(r.feature_map_bytes).c_str(),
                format_bytes(r.total_bytes).c_str());
    if (gpu) print_device_memory(*device, r, step.params().bytes(), device_peak);
  }
  return 0;
}

}  // namespace mnemo
