// The training pipeline, one pass after another (docs/DESIGN.md: plain passes called in order):
//   config -> forward graph (models/) -> mirror plan (memory/mirror_planner: the mode's planner,
//   then the config's per-node `mirror` overrides) -> training graph + schedule (autograd/) ->
//   memory plan (memory/) -> executor (core/).
// Each function requires the product of the one before and returns plain data.
#pragma once
#include <memory>
#include "memory/mirror_planner.h"
#include "train/config/config.h"

namespace mnemo {

struct Pipeline {
  DataShape data;
  BuiltModel model;
  std::map<int, int> mirror_overrides;  // node id -> m from the config
  int ranks = 1;  // data parallelism: the gradients are averaged over this many ranks (docs/PARALLEL.md)
  bool reduce_one_rank = false;  // the all-reduce nodes also when ranks is 1 (parallel.reduce_one_rank)
};

// Builds the forward model for `batch` examples and resolves the config's per-node mirror counts
// (an unknown node name is an error naming the config). `ranks` > 1: one rank's part of a
// data-parallel step (`batch` is then the rank's share of the global batch). `reduce_one_rank`: with
// one rank, the all-reduce nodes anyway (a one-rank run with parallel.reduce_one_rank).
// `rank` (data parallelism): this process's rank; its dropout nodes draw the masks of its share of
// the global batch (DropoutParams::offset), so the ranks together draw one process's masks.
Pipeline build_pipeline(const Config& c, const DataShape& data, int64_t batch, int ranks = 1, bool reduce_one_rank = false,
                        int rank = 0);

// Mirror plan + training graph + memory plan for memory mode `mode` (e.g. "share", "sublinear").
// `with_update`: the config's SGD update inside the step (training); false: the gradients are the
// step's outputs (`mnemo grad`). `device`: the backend that will run it (null: the CPU).
// `budget_memo`: shared by plans of budget=SIZE that differ in SIZE only (MemoryMode::budget_memo).
MirrorResult plan_pipeline(const Config& c, const Pipeline& p, const std::string& mode, const Device* device = nullptr,
                           bool with_update = true, std::shared_ptr<BudgetMemo> budget_memo = nullptr);

}  // namespace mnemo
