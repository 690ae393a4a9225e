// `mnemo train`, `grad` and `bench`: one run from a config, top to bottom:
//   config -> data source -> pipeline (model, mirror plan, training graph with the SGD update
//   inside it) -> memory plan -> BoundStep on the device (train/session/step.h) -> the trainer's loop
//   (batches staged on the device, learning-rate schedule, non-finite checks, metrics,
//   checkpoints) -> evaluation in the step's arena.
#pragma once
#include <memory>
#include <string>

#include "train/config/config.h"
#include "train/data/data.h"

namespace mnemo {

struct TrainOptions {
  std::string config;
  std::string memory;      // overrides the config's memory mode ("" = keep)
  std::string order;       // overrides the config's schedule order ("" = keep)
  double placement_seconds = -1;  // overrides the config's placement_seconds (< 0 = keep)
  int64_t steps = 0;       // overrides train.steps / epochs (0 = keep)
  std::string resume;      // checkpoint to continue from
  std::string device;      // overrides the config's device
  std::string save_init;   // write the initial weights here and exit
  std::string init;        // start from these weights (safetensors, names as docs/FORMATS.md)
  std::string checkpoint;  // write the final checkpoint here (besides checkpoint.dir)
  bool eval = true;
  bool profile = false;    // print time per op at the end
  bool eager = false;      // on a device: launch node by node instead of replaying a captured step
  bool force = false;      // skip the pre-flight memory check
};

// The data source a config names, for the training or test split.
std::shared_ptr<const DataSource> make_source(const Config& c, Split split);
DataShape data_shape_of(const Config& c, const DataSource& src);

// The config's train.threads for the CPU kernels (and the CPU workspace sizes planned from the
// thread count); 0 leaves OpenMP's default (all cores, or OMP_NUM_THREADS). Every command that
// plans or runs a config calls it, so plan, grad, bench and train agree on bytes and bits.
void use_config_threads(const Config& c);
int run_train(const TrainOptions& opt);  // returns a process exit code; throws mnemo::Error

struct GradOptions {
  std::string config, weights, batch, out;
  std::string memory;  // "" = the config's
  std::string order;   // "" = the config's
  std::string device;  // "" = the config's
  bool force = false;  // skip the pre-flight memory check
};
int run_grad(const GradOptions& opt);

}  // namespace mnemo

namespace mnemo {

struct BenchOptions {
  std::string config;
  std::string memory;   // "" = the config's
  std::string order;    // "" = the config's
  double placement_seconds = -1;  // < 0 = the config's
  int steps = 10, warmup = 2;
  int64_t batch = 0;    // 0 = the config's
  bool json = false;
  std::string device;   // "" = the config's
  bool eager = false;   // on a device: launch node by node instead of replaying a captured step
  bool force = false;   // skip the pre-flight memory check
};
// Times training steps (forward, backward, SGD update) on synthetic batches of the config's
// shapes; prints the median step time and the memory report.
int run_bench(const BenchOptions& opt);

}  // namespace mnemo
