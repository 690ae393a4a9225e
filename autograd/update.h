// The optimiser update as part of the training graph (docs/DESIGN.md: one update node per
// parameter right after the last reader of the parameter and its gradient). Runs after the
// gradient pass, before memory planning, so the update's state is planned and every device runs
// the same step, update included:
//   - `optimizer/lr` (input, [1] of the parameters' dtype): the learning rate, bound each step (a captured step
//     replays with the current one);
//   - `velocity/<param>` (param, not trainable): SGD's momentum buffer per trainable parameter;
//   - `optimizer/loss_check` (finite_check of the loss) right after the forward nodes: the step's
//     status word, 0 or -1;
//   - `<param>/update` (sgd_update, in place on the parameter and its velocity) right after the
//     last node that reads the parameter (through any view, recomputation included) or its
//     gradient. Updates chain the status word: the first one whose gradient holds a NaN or Inf
//     stores its 1-based index, and it and every later one leave their parameters unchanged.
//   - the graph's state updates (BatchNorm running statistics, copied by the executor after a
//     step) become `assign` nodes at the end, gated on the final status word, so a step that
//     failed leaves them as they were.
// A parameter's gradient is then an ordinary entry that dies at its update (no longer a graph
// output). Requires: a TrainingGraph from build_training_graph. Provides: the same, with updates.
#pragma once
#include "autograd/gradient.h"

namespace mnemo {

struct SgdSpec {
  double momentum = 0.9;
  double weight_decay = 0.0;
  // Data parallelism (autograd/allreduce.h): with ranks > 1 the gradients are averaged over the
  // ranks, in buckets of at most bucket_bytes, before their updates.
  int ranks = 1;
  int64_t bucket_bytes = 0;  // 0: automatic (autograd/allreduce.h)
  // The all-reduce nodes also with one rank (parallel.reduce_one_rank: measures their overhead).
  bool reduce_one_rank = false;
};

// Rewrites `tg` in place. Its nodes are moved into the new graph, not copied (planners call this
// for every candidate plan), so if it throws, `tg` is left unusable: discard it (every caller
// does; it throws only on an internal error).
void add_sgd_updates(TrainingGraph& tg, const SgdSpec& spec);

}  // namespace mnemo
