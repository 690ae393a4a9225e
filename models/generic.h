// A generic graph model: nodes listed (in any order) with named inputs, so any DAG of registered
// ops can be trained and planned. Inputs refer to a node's output as "name" (output 0) or
// "name:k". Built in topological order (ties keep the listed order).
#pragma once
#include <map>
#include <string>
#include <vector>

#include "models/resnet.h"

namespace mnemo {

struct GraphNodeSpec {
  std::string name, op;
  std::vector<std::string> inputs;
  Attrs attrs;
  int mirror = -1;     // per-node mirror count from the config (-1: planner decides)
  std::string where;   // "file:line:col" of the node in its config, for errors
};

struct GraphVarSpec {
  std::string name;
  Shape shape;
  DType dtype = DType::f32;
  ParamInit init;       // params only
  bool trainable = true;
  std::string where;
};

struct GraphModelConfig {
  std::vector<GraphVarSpec> inputs;  // must include "data" and "labels"
  std::vector<GraphVarSpec> params;
  std::vector<GraphNodeSpec> nodes;
  std::string loss, logits;
  std::string where;
};

// `training`: a training graph; else an evaluation graph. Two nodes depend on it:
//   batch_norm with five inputs (x, gamma, beta, running_mean, running_var; attrs eps, momentum):
//     training-mode batch norm and the running statistics' update, or inference on the statistics;
//   dropout with one input (attr p): training-mode dropout (the step counter input is added), or
//     an identity.
BuiltModel build_graph_model(const GraphModelConfig& c, bool training = true);

// `e`'s message, led by the file and line of the node it names when that node is one of `c`'s
// (graph passes know a node's name only).
std::string graph_node_where(const GraphModelConfig& c, const NodeError& e);

}  // namespace mnemo
