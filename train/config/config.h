// Training configuration files (YAML): model, data, optimiser, schedule, memory mode, device,
// steps or epochs, checkpointing. Loading validates everything: an unknown key, a wrong type or an
// impossible value is a mnemo::Error of the form
//   "configs/x.yaml:12:5: model.depth: expected an integer 6n+2, got 21"
// i.e. file:line:column, the key path and what was expected. Nothing is silently defaulted
// except the documented defaults below (docs/CONFIG.md lists every key).
#pragma once
#include <map>
#include <string>
#include <vector>

#include "models/generic.h"
#include "models/lstm.h"
#include "models/resnet.h"
#include "models/zoo.h"

namespace mnemo {

struct DataConfig {
  std::string source = "synthetic";  // synthetic | fashion-mnist | fashion-mnist-rows | cifar10 | text | synthetic-seq
  std::string path;                  // directory (fashion-mnist, cifar10) or file (text)
  int64_t batch = 64;
  int64_t eval_batch = 0;            // 0: same as batch
  Shape shape;                       // synthetic: per-example shape, e.g. [3, 32, 32] or [T, D]
  int64_t classes = 10;              // synthetic
  int64_t size = 50000;              // synthetic: examples per epoch
  int64_t eval_size = 10000;         // synthetic: test examples
  int64_t steps = 0;                 // text: characters per sequence
  bool eval = true;                  // evaluate accuracy on the test split at the end
};

struct OptimizerConfig {
  std::string type = "sgd";
  double lr = 0.1, momentum = 0.9, weight_decay = 0.0;
};

struct ScheduleConfig {
  std::string type = "constant";  // constant | step | cosine
  int64_t warmup_steps = 0;       // linear warm-up from lr/100... see docs/CONFIG.md
  std::vector<int64_t> milestones;  // step: steps at which lr *= gamma
  double gamma = 0.1;
  double min_lr = 0.0;            // cosine floor
};

struct RunConfig {
  int64_t steps = 0;   // exactly one of steps / epochs
  int64_t epochs = 0;
  int64_t log_every = 10;
  int64_t eval_every = 0;  // 0: only at the end
  uint64_t seed = 1;
  int threads = 0;         // 0: all cores
  std::string metrics;     // JSON-lines file ("" = none)
};

struct CheckpointConfig {
  std::string dir;        // "" = no checkpoints
  int64_t every = 0;      // steps between checkpoints (0: only at the end)
};

// Data parallelism (docs/PARALLEL.md): used when the run is started by mpirun with several ranks.
struct ParallelConfig {
  int64_t bucket_bytes = 0;  // gradients all-reduced together, at most this many bytes; 0: automatic
  double timeout_s = 300;                    // a collective waiting longer stops every rank
  bool reduce_one_rank = false;  // one rank keeps the all-reduce path (to measure its overhead)
};

struct Config {
  std::string file;
  std::string model_type;  // resnet | lstm | graph | alexnet | vgg | densenet | inception_v3 | mobilenet_v2
  ResNetConfig resnet;
  ZooConfig zoo;            // alexnet, vgg, densenet, inception_v3, mobilenet_v2 (models/zoo.h)
  LstmConfig lstm;
  // model.head of an LSTM: auto, ops or fused; build_model resolves it per device into
  // lstm.fused_head (auto: fused for per-step classifiers on the CPU, ops otherwise).
  std::string lstm_head = "auto";
  GraphModelConfig graph;
  std::map<std::string, int> mirror;  // per-node mirror counts (override any planner)
  DataConfig data;
  OptimizerConfig optimizer;
  ScheduleConfig schedule;
  RunConfig run;
  std::string memory = "share";
  double placement_seconds = 5;  // the exact placement's time limit per plan (memory/placement.h); 0: best fit only
  std::string order = "default";  // the schedule order (memory/order.h): default, greedy or optimal
  std::string device = "cpu";
  CheckpointConfig checkpoint;
  ParallelConfig parallel;
};

// Limits of config values (every integer key is range-checked against these or tighter bounds,
// never wrapped; docs/CONFIG.md lists them).
constexpr int64_t kMaxInt = INT32_MAX;             // default bound of integer keys
constexpr int64_t kMaxSteps = 1000000000;          // train.steps, epochs, --steps, schedule steps
constexpr int64_t kMaxMirror = 64;                 // per-node mirror counts
constexpr int64_t kMaxConfigBytes = 4 << 20;       // a config file larger than this is refused

Config load_config(const std::string& path);
// Parses YAML text; `name` is used as the file name in errors.
Config parse_config(const std::string& text, const std::string& name);
// Sets the batch size (plan's and bench's --batch, curve's --vary batch): data.batch and, in a graph
// config, data's and labels' first dimension (an attribute that names the batch is not rewritten:
// shape inference then names it).
void set_batch(Config& c, int64_t batch);

// What the data source provides: per-example shape ([C,H,W], or [T,D] for sequences) and classes.
struct DataShape {
  Shape sample;
  int64_t classes = 0;
  bool per_step_labels = false;  // labels [T] per example (next-character prediction)
};
// The data shape known without reading data (synthetic, fashion-mnist, cifar10); text sources
// need their file (train/ resolves them through the data layer).
DataShape static_data_shape(const Config& c);

// The forward model a config describes for `batch` examples of `shape`; training = false gives
// BatchNorm in inference mode (running statistics) for evaluation.
BuiltModel build_model(const Config& c, const DataShape& shape, int64_t batch, bool training = true);
// Whether a config's device (cpu, host, cuda, cuda:N) is a GPU.
inline bool is_cuda_device(const std::string& device) { return device.rfind("cuda", 0) == 0; }
// model.layout resolved for `device` (a config's device: cpu, host, cuda, cuda:N) into the ResNet
// builder's channel block: plain 0; blocked oneDNN's block on this CPU (an error on a GPU or where
// oneDNN has none); auto blocked on the CPU when that block divides the widths (float32), else 0.
int64_t resnet_block(const ResNetConfig& r, const std::string& device);
// model.head resolved for the config's device: ops false, fused true; auto true for an LSTM with a
// classifier at every step (per_step) on the CPU, false otherwise (on a GPU until the fused head's
// kernels have run on one).
bool lstm_fused_head(const Config& c);

}  // namespace mnemo
