// Graphs of the built-in small models for inspection (`mnemo graph`): the forward graph, or the
// training graph under a uniform mirror count.
#pragma once
#include <string>

#include "core/graph.h"

namespace mnemo {

// model: "mlp", "cnn" or "lstm"; mirror < 0: forward graph only; mirror >= 0: training graph
// with m(v) = mirror for every non-leaf node (0 = plain backprop).
Graph small_model_graph(const std::string& model, int mirror);

}  // namespace mnemo
