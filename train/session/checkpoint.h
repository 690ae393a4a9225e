// Training checkpoints in the safetensors format (train/session/safetensors.h, docs/FORMATS.md):
//   "param/<name>"     every parameter (weights and running statistics), float32
//   "velocity/<name>"  SGD momentum buffer of every trainable parameter
//   metadata: format "mnemo-checkpoint-2", step, data_position (batches consumed), seed,
//             model_signature (every parameter's name and type), config, mnemo version, and
//             (since they were added; older checkpoints lack them) data_order, training, loss_ema.
// Saving is atomic (temp file, fsync, rename): a crash or kill mid-save leaves the previous
// checkpoint intact. Loading refuses a corrupt file or one made for another model, naming the
// file and the first mismatch.
#pragma once
#include <limits>
#include <string>

#include "train/session/param_store.h"
#include "train/session/sgd.h"

namespace mnemo {

struct TrainState {
  int64_t step = 0;           // optimiser steps done
  int64_t data_position = 0;  // batches the loader has handed out
  uint64_t seed = 0;
  // What data_position counts (metadata "data_order", e.g. "batches of 128 from 60000 fashion-mnist
  // examples"): a resume reading other batches would land elsewhere in the data. Empty in
  // checkpoints saved before it was written (not checked then).
  std::string data_order;
  // The optimiser and schedule it was training with (metadata "training", describe_training) and
  // the step log's running mean of the loss (metadata "loss_ema"): empty and NaN in older ones.
  std::string training;
  double loss_ema = std::numeric_limits<double>::quiet_NaN();
};

std::string model_signature(const ParamStore& params);

void save_checkpoint(const std::string& path, const ParamStore& params, const Sgd& sgd, const TrainState& state,
                     const std::string& config_file);
// Restores params and optimiser state in place; returns the saved state.
TrainState load_checkpoint(const std::string& path, ParamStore& params, Sgd& sgd);

}  // namespace mnemo
