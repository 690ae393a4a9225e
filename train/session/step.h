// One planned training step ready to run on a device, and the evaluator that runs the eval-mode
// graph in the same device memory. Shared by `mnemo train`, `grad` and `bench`:
//   BoundStep   the mirror and memory plan for the device, the executor on it, the parameters
//               (and with an optimiser its velocities and the learning rate) bound where the
//               device reads them; after each run, finish() reads the loss and the status word of
//               the step's updates and stops with a message naming the step and the first node
//               whose output is not finite when the loss or a gradient is NaN or Inf.
//   Evaluator   test-set accuracy with the eval-mode graph (BatchNorm on running statistics),
//               planned once and run in the training step's arena (idle between steps).
#pragma once
#include <memory>
#include <string>

#include "core/executor.h"
#include "train/data/data.h"
#include "train/session/device_state.h"
#include "train/session/pipeline.h"

namespace mnemo {

// A batch held on the host where an executor on `device` reads it: the host tensors themselves
// on the CPU; else copies in device buffers allocated at the first call (none per batch).
class DeviceInputs {
 public:
  explicit DeviceInputs(Device& device) : device_(device) {}
  ~DeviceInputs();
  DeviceInputs(const DeviceInputs&) = delete;
  DeviceInputs& operator=(const DeviceInputs&) = delete;
  std::vector<TensorView> put(std::initializer_list<const Tensor*> host);

 private:
  Device& device_;
  std::vector<char*> buffers_;
};

// Plans the step of `p` for `device` (mode c.memory; `with_update`: the SGD update inside it) and
// checks, before anything large is allocated, that it fits the device's memory with `extra` bytes
// of input staging and prefetch (train/session/preflight.h; `force` skips the check).
MirrorResult plan_step(const Config& c, const Pipeline& p, Device& device, bool with_update, bool force, int64_t extra);
// Bytes of input staging and loader prefetch a run holds besides the plan: `batches` batches of
// the model's data and labels.
int64_t batch_bytes(const Pipeline& p, int64_t batches);

class BoundStep {
 public:
  // `mr`: the step planned for `device` (plan_step). `sgd`: the optimiser whose update runs inside
  // the step (the plan must have it); null: no update, the gradients are the step's outputs
  // (`mnemo grad`). `capture`: on a device that can, replay the step as one captured graph.
  BoundStep(MirrorResult mr, const Pipeline& p, ParamStore& params, Sgd* sgd, Device& device, bool capture = false);
  ~BoundStep();
  BoundStep(const BoundStep&) = delete;
  BoundStep& operator=(const BoundStep&) = delete;

  // The plan's result; its memory plan (planned.plan) is moved into the executor: executor().plan().
  const MirrorResult& result() const { return mr_; }
  const TrainingGraph& training() const { return mr_.training; }
  Executor& executor() { return ex_; }
  DeviceParams& params() { return dparams_; }
  Device& device() { return device_; }
  TensorType input_type(const std::string& name) const;

  void bind(TensorView x, TensorView y);                // a batch already in device memory
  void bind_host(const Tensor& x, const Tensor& y);     // a host batch (synchronous copy)
  void set_lr(double lr);                               // the learning rate of the next run
  void set_step(int64_t step);                          // the step number dropout masks of the next run draw on
  void run() { ex_.run(); }
  // After run(): the loss (waits for the device). Throws mnemo::Error when the loss or, with an
  // optimiser, a gradient is NaN or Inf: the message names the step (`what`, e.g. "step 12"), the
  // value, and the first node with a non-finite output (the step replayed node by node).
  double finish(const std::string& what);
  // Replays the step to name the first non-finite value; throws with `problem` and that.
  [[noreturn]] void fail_non_finite(const std::string& problem);
  // A data-parallel step is not replayed (its all-reduce nodes would wait for ranks that do not
  // replay): the message then says how to locate the value on one process.
  void set_replay(bool on) { replay_ = on; }

 private:
  const Pipeline& p_;
  Device& device_;
  MirrorResult mr_;
  Executor ex_;
  DeviceParams dparams_;
  DeviceInputs inputs_;
  double lr_host_[1] = {0};  // the next learning rate, in the lr input's dtype (float or double)
  void* lr_ = nullptr;       // device memory bound to the step's learning-rate input
  int32_t step_host_ = 0;    // the next step counter (models with dropout)
  void* step_ = nullptr;     // device memory bound to the graph input kRngStep, if the model has one
  bool replay_ = true;
};

class Evaluator {
 public:
  // The eval graph at the config's eval batch, planned with `share`, running in `lend`'s arena
  // when it fits (else in its own). Parameters are bound where `params` keeps them.
  Evaluator(const Config& c, const DataShape& ds, Device& device, const DeviceParams& params, const Executor& lend,
            bool capture);
  struct Result {
    double accuracy = 0;
    // The test loss: for the built-in models the mean softmax cross-entropy of every scored row
    // (loss_examples == examples); for a graph config the mean of the full batches' losses (a
    // partial last batch is scored, but its loss would average in the padding rows), NaN when
    // there is no full batch (loss_examples 0). The accuracy covers every example.
    double loss = 0;
    int64_t examples = 0, loss_examples = 0;
  };
  Result run(const DataSource& test);
  bool borrows_arena() const { return ex_->allocated_bytes() == 0; }
  int64_t batch() const;  // the evaluation batch

 private:
  const Config& c_;
  BuiltModel m_;
  Graph fg_;
  DeviceInputs inputs_;
  std::unique_ptr<Executor> ex_;
};

}  // namespace mnemo
