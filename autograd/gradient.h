// The gradient pass of Chen et al. 2016, Alg. 2: from a forward graph, the entries to
// differentiate (the loss, or explicit seeds) and a mirror plan m(v), build the explicit training
// graph. Its node order is the one execution schedule: the forward nodes in order, then for each
// forward node v in reverse order the backward nodes its grad function built, each preceded by the
// not-yet-run recomputed (mirrored) nodes it reads, so recomputation runs right before its first
// backward consumer. m = 0 everywhere is plain backpropagation.
//
// Requires: a typed forward graph (core/graph.h). Provides: TrainingGraph (graph + where the
// gradients are). Gradients of an entry used several times are summed as they arrive, in one
// fixed order (reverse forward order), each partial sum feeding the next `add` in place, so an
// LSTM weight shared across T steps needs no buffer per use and every mirror plan sums in the
// same order (bitwise identical results).
#pragma once
#include <vector>

#include "core/graph.h"

namespace mnemo {

// m(v) per forward node: 0 keep; k >= 1 drop and recompute, k levels deep (Chen Sec. 4.4).
// Leaves (input, param) are never mirrored; their counts are ignored.
using MirrorPlan = std::vector<int>;

struct ParamGrad {
  int param;       // node id of the param (same id in the forward and training graphs)
  EntryRef grad;   // its gradient in the training graph
};

struct TrainingGraph {
  Graph graph;                   // schedule order; forward node ids are unchanged
  EntryRef loss;                 // invalid when built from explicit seeds
  std::vector<ParamGrad> grads;  // one per requested node, in request order
  int num_forward = 0;           // nodes [0, num_forward) are the forward graph
  // With the optimiser inside the step (autograd/update.h); else empty / invalid. The gradients
  // above are then consumed by the updates and are not readable after a step.
  int lr = -1;                         // input node of the learning rate
  std::vector<int> optimizer_state;    // velocity param nodes, in grads order
  EntryRef status;                     // int32[1] after the step: 0 ok, -1 loss not finite, k: grads[k-1]
};

struct Seed {
  EntryRef entry;     // an entry of the forward graph
  EntryRef gradient;  // an entry of the forward graph holding d(objective)/d(entry)
};

// Gradients of the scalar `loss` with respect to every trainable param. `index_names` false: the
// graph is built without its name index (Graph::copy_without_name_index; the same nodes, names unchecked),
// for the throwaway graphs the mirror searches only analyse.
TrainingGraph build_training_graph(const Graph& forward, EntryRef loss, const MirrorPlan& mirror, bool index_names = true);

// General form: gradients of sum_i <seed_i.entry, seed_i.gradient> with respect to the output of
// each node in `wrt` (params or inputs). A wrt node no gradient reaches gets a zero gradient.
TrainingGraph build_gradient_graph(const Graph& forward, const std::vector<Seed>& seeds,
                                   const std::vector<int>& wrt, const MirrorPlan& mirror);

}  // namespace mnemo
