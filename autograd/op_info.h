// Introspection of an op's backward: builds the op's sample node, runs its grad function with a
// gradient for every differentiable output, and reports which forward entries the backward nodes
// read (its minimal dependencies, as declared by construction). Used by `mnemo ops` and tests.
#pragma once
#include <string>
#include <vector>

#include "core/op_registry.h"

namespace mnemo {

struct BackwardReads {
  bool differentiable = false;
  std::vector<int> inputs;             // forward inputs read by the backward nodes
  std::vector<int> outputs;            // forward outputs read by the backward nodes
  std::vector<std::string> backward_ops;  // ops of the nodes grad builds
};

BackwardReads backward_reads(const OpDef& op);

}  // namespace mnemo
