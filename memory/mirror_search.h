// What the mirror planners share (memory/mirror_planner.cpp and memory/budget_planner.cpp):
// evaluating candidate plans (in parallel), finding equal ones. Internal to memory/.
#pragma once
#include <functional>
#include <map>
#include <vector>

#include "autograd/update.h"
#include "memory/mirror_planner.h"
#include "memory/parallel.h"

namespace mnemo {

// One plan_mirror call: the forward graph, its loss, the mode, the config's per-node overrides,
// the optimiser (or null) and the device the plans are for.
struct PlanContext {
  const Graph& fwd;
  EntryRef loss;
  const MemoryMode& mode;
  const std::map<int, int>& overrides;
  const SgdSpec* sgd;
  const Device* device;
  // `m` (empty: keep everything) with the per-node overrides on top.
  MirrorPlan apply(MirrorPlan m) const;
  // The training graph of `m` (with the optimiser update) and its memory plan (`prune_above`: see
  // plan_training_step).
  // With order `optimal`, candidates are ordered by `greedy` (a programme per candidate would cost
  // seconds each); finish_order then gives the plan chosen the programme's order.
  // `enough`: see plan_memory (a search that asks only whether the plan fits).
  MirrorResult evaluate(const MirrorPlan& m, int64_t prune_above = -1, int64_t enough = -1) const;
  // ... in schedule order `order`.
  MirrorResult evaluate_in(const MirrorPlan& m, ScheduleOrder order, int64_t prune_above = -1, int64_t enough = -1) const;
  // The chosen plan with order `optimal`: re-planned with the programme's order, kept when its
  // total is no larger (the same peak or lower; packing could differ).
  void finish_order(MirrorResult& best) const;
  // The exact placement of `r`'s plan for up to `seconds` when it is above its live-bytes bound
  // (the candidates were compared by their best-fit packings). It replaces a best-fit packing, and
  // an earlier exact placement only when it is smaller (each search starts from best fit).
  void place(MirrorResult& r, double seconds) const;
};

// same[i]: the first plan equal to plans[i] (i itself when none before it is).
std::vector<size_t> first_equal(const std::vector<MirrorPlan>& plans);

// budget=SIZE (memory/budget_planner.cpp).
MirrorResult plan_budget(const PlanContext& ctx);

}  // namespace mnemo
