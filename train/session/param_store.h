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

}  // namespace mnemo
