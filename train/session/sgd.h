// SGD with momentum and weight decay (PyTorch's formulation):
//   v = momentum * v + (g + weight_decay * w);   w = w - lr * v
// The update runs inside the planned step (autograd/update.h: one sgd_update node per trainable
// parameter); this class holds its options and state: one velocity per trainable parameter, beside
// the parameter store, bound to the step's `velocity/<param>` nodes and saved in checkpoints.
#pragma once
#include "train/session/param_store.h"

namespace mnemo {

struct SgdOptions {
  double lr = 0.1;
  double momentum = 0.9;
  double weight_decay = 0.0;
};

class Sgd {
 public:
  Sgd(const ParamStore& params, SgdOptions opt);
  int64_t state_bytes() const;
  const SgdOptions& options() const { return opt_; }
  // Momentum buffers, one per trainable parameter in spec order (checkpoints read and restore them).
  std::vector<Tensor>& state() { return velocity_; }
  const std::vector<Tensor>& state() const { return velocity_; }

 private:
  SgdOptions opt_;
  std::vector<Tensor> velocity_;
};

}  // namespace mnemo
