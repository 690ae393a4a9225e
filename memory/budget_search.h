// budget=SIZE:search (and the first half of :exact): a local search over mirror plans, every
// step planned exactly, from the plan the family chose (docs/MEMORY.md "The local search").
//
// A move keeps one recomputed node back. When the plan no longer fits, the kept nodes whose
// values are live at its exact peak and first read by backward after it are let go, the least
// recompute cost per byte first, until their bytes cover the excess, and it is planned again (up
// to kSearchRepairs times; a move whose cost reaches kSearchSlack times the current plan's is
// given up). A plan that fits is filled (memory/budget_fill.h: what fits kept back, both orders)
// and the move is taken when the result costs less than the current plan. Passes over the
// recomputed nodes, the most recompute cost per byte first, repeat until a pass takes no move (a
// local optimum) or the time limit.
// Deterministic: moves are tried in batches on the threads, all from the same plan, and the first
// one in the order that improves is taken, so the result does not depend on the thread count.
// Not monotone in SIZE (the family's choice is; docs/MEMORY.md).
// Requires: a PlanContext without per-node overrides, a start that fits. Provides: BudgetSearch.
#pragma once
#include <functional>
#include <optional>

#include "memory/mirror_search.h"

namespace mnemo {

struct BudgetSearch {
  std::optional<MirrorResult> plan;  // a plan that fits and costs less than the start (none: no move found)
  int moves = 0, taken = 0, evaluations = 0;
  // Plans met again and not built (budget_search.cpp): the moves' fills judged by what the search
  // learnt of them (probes_remembered; each spares one of `evaluations`), and the fills' own light
  // evaluations (FillMemo, memory/budget_fill.h); `remembered` counts both.
  int remembered = 0, probes_remembered = 0;
  bool local_optimum = false;         // a whole pass took no move (else: the time limit)
  double seconds = 0;
};

struct BudgetSearchOptions {
  int64_t limit = 0;        // the step's total bytes may not exceed this
  int64_t arena_limit = 0;  // ... nor the live bytes this (the fills' level)
  double seconds = 10;
  int batch = 0;  // moves tried at once, from the same plan (0: one per OpenMP thread); the result does not depend on it
  bool remember = true;  // fills met again judged by what was learnt of them (false: planned again; the same result)
  // From 1 s on, at most once a second: the search so far and the current plan's cost.
  std::function<void(const BudgetSearch&, double cost)> progress;
};

BudgetSearch search_budget(const PlanContext& ctx, const MirrorResult& start, const BudgetSearchOptions& options);

}  // namespace mnemo
