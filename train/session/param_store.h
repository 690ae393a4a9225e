// ParamStore: the persistent storage of a model's parameters (weights and non-trainable state
// such as BatchNorm running statistics), initialised from the builder's ParamSpecs with a seed.
// Each parameter draws from its own stream (seed, name), so adding a parameter never changes the
// initial values of the others.
#pragma once
#include <map>
#include <string>
#include <vector>

#include "core/executor.h"
#include "models/builder.h"

namespace mnemo {

class ParamStore {
 public:
  ParamStore(const Graph& g, const std::vector<ParamSpec>& specs, uint64_t seed);

  Tensor& at(const std::string& name);
  const Tensor& at(const std::string& name) const;
  const std::vector<ParamSpec>& specs() const { return specs_; }
  void bind(Executor& ex) const;  // binds every param node of the executor's graph by name
  int64_t bytes() const;

 private:
  std::vector<ParamSpec> specs_;
  std::map<std::string, Tensor> values_;
};

// Throws naming `what` (the file, e.g. "--init W.safetensors"), the tensor and the element when a
// non-trainable parameter of `specs` (running statistics) in `values` holds a non-finite value: the
// training step never reads them (its checks name a non-finite weight at step 1), so they would
// reach evaluation and the checkpoints unnoticed. `values`: prefix + name -> tensor (only float32
// checked).
void check_state_finite(const std::vector<ParamSpec>& specs, const std::map<std::string, Tensor>& values, const std::string& what,
                        const std::string& prefix = "");

}  // namespace mnemo
