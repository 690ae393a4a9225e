// budget=SIZE's exact solver and its proven bound: a mixed-integer programme over which forward
// results stay live into the backward pass, in the spirit of Checkmate, solved by COIN-OR CBC
// (docs/MEMORY.md "Memory budgets").
//
// The plans: mirror plans m(v) in {0, 1} per compute node, each view dropped with the node whose
// memory it aliases (a view kept on a dropped input would keep that input anyway). The schedule is
// the gradient pass's: all of forward, then backward in one fixed order of its own nodes, each
// recomputed node produced right before the first backward node that needs it.
//
// The programme is a relaxation of "the least recompute cost whose arena fits" (each node's
// Cost::roofline at the options' balance; "cost" below): every 0/1 plan
// whose exact arena fits is feasible in it, at no more than its recompute cost, so the optimum of
// any solve (or CBC's best possible value at a time limit, or the LP relaxation's optimum) is a
// lower bound (tested: BudgetExact.AdmitsEveryPlanAtItsOwnArena admits each of 3520 enumerated
// plans at its own arena, and the bound never exceeds the least recompute of an enumerated plan
// that fits). Bytes and costs are scaled to the limit and to the forward pass (byte_unit,
// cost_unit): in MiB and GFLOP a small net's rows fell below CBC's tolerances and it reported
// wrong optima. Variables, per compute node v: k_v = 1 when v's own forward result is read after
// the forward pass (kept); r_v = 1 when v is recomputed; C_{v,g} = 1 when v's recomputed copy
// exists before gap g (backward node g's step). Rows:
//   - a result backward reads is kept or recomputed; a recomputed node's inputs are kept or
//     recomputed (and recomputed before it);
//   - at each modelled gap the values certainly live fit: backward's own values in flight, the
//     results backward reads at and around the step, the step's own outputs (unless it may write
//     them in place) and workspace (constants, the same in every plan), kept results read later,
//     and recomputed copies already made and read later; at each modelled forward step, the
//     values in flight, its workspace and the results kept so far.
// Every entry counted at a step is live during it in its own buffer, so the sum is at most the
// arena (memory/liveness.h: in-place joins a buffer only to an input that has died).
//
// The search is a cutting-plane loop: solve, plan the solution exactly; when it does not fit, add
// the gap where its exact plan peaks, or when that gap is already modelled, cut that plan off (it
// does not fit, so the cut is valid); repeat until a solution fits (the programme's optimum within
// CBC's 2% relative gap), or the time limit. The bound is the best proven by any honest solve.
// What the programme does not model (values live only while recomputation runs, packing) makes
// its optimum lower than the least plan that fits: that is the gap reported.
// Requires: a forward graph, the training graph of its keep-all plan. Provides: ExactBudget.
#pragma once
#include <functional>
#include <string>
#include <vector>

#include "autograd/gradient.h"
#include "memory/planner.h"

namespace mnemo {

// The exact plan of a candidate: does it fit, what does it recompute, and where does it peak
// (peak_gap: see budget_peak_gap).
struct BudgetCheck {
  bool fits = false;
  int64_t excess_bytes = 0;  // total above the limit (when it does not fit)
  double recompute_cost = 0;
  int peak_gap = -1;
  std::vector<int> recomputed;  // the forward nodes its training graph recomputes
};

struct ExactBudget {
  MirrorPlan plan;            // the best plan the solver found that fits (empty: none)
  double plan_cost = -1;     // its recompute cost
  double bound_cost = 0;     // proven: no plan of this space whose arena fits recomputes less
  bool proven = false;        // the bound is met by the incumbent or `plan` (gap 0)
  std::string status;         // optimal | time limit | lp | no-incumbent ...
  double root_bound_cost = 0;  // the best bound of the root's cuts (Root below; 0: none ran or proved)
  int solves = 0, gaps = 0, cuts = 0, binaries = 0, columns = 0, rows = 0;
  double seconds = 0;
};

struct ExactBudgetOptions {
  int64_t arena_limit = 0;        // the arena may not exceed this (bytes)
  double incumbent_cost = -1;    // the best known plan that fits (>= 0): the solver seeks less
  double seconds = 10;            // time limit of the whole loop
  bool integer = true;            // false: the LP relaxation only (a bound, no plan: budget's fast solver)
  int max_gaps = 16;              // gaps modelled at the start (more are added where plans peak)
  // The LP relaxation (integer false): after a solve, the gaps its solution overfills are modelled
  // and it is solved again (cutting rounds), up to lp_rounds more times, lp_gaps_per_round gaps a
  // round: while the round's LP has at most lp_round_columns columns, or, when lp_round_seconds >
  // 0, while twice the last solve's time fits in it.
  int lp_rounds = 0;
  int lp_gaps_per_round = 4;
  int64_t lp_round_columns = 0;
  double lp_round_seconds = 0;
  // The integer programme's root node (run_milp's root_only: CBC's cutting planes on the LP, no
  // heuristics, no branching), whose bound is the LP's strengthened by valid cuts. never; first
  // (the LP relaxation, integer false; `:fast=SECONDS`): before the rounds, on the gaps they start
  // from, and again after them on the gaps they modelled, within lp_round_seconds (more gaps make
  // the root slower); after_rounds (the mixed-integer programme, integer true; `:exact`): after
  // its LP rounds, on their gaps. A root's bound at its time limit is not taken.
  enum class Root { never, first, after_rounds } root = Root::never;
  // The mixed-integer programme (integer true) with lp_rounds > 0: the LP's cutting rounds run
  // first (on the same time limit, starting from lp_max_gaps gaps when > 0, else max_gaps), and
  // the programme starts with the gaps they modelled; the bound is the larger of theirs.
  int lp_max_gaps = 0;
  const Device* device = nullptr; // whose op workspaces the plans have (null: the CPU)
  double balance = kDefaultBalance;  // the nodes' costs: Cost::roofline at this many FLOPs per byte
  // Called after every solve: solves so far, seconds, the least recompute of a plan found to fit
  // (cost, the incumbent's at first) and the bound (progress output on long solves).
  std::function<void(int, double, double, double)> progress;
};

// `check` plans a candidate exactly. `keep_all`: the training graph of the all-zero plan (with the
// optimiser update when the step has one).
ExactBudget solve_budget_exact(const Graph& forward, const TrainingGraph& keep_all, const ExactBudgetOptions& options,
                               const std::function<BudgetCheck(const MirrorPlan&)>& check);

// Where the exact plan of `tg` peaks, as a gap of the model: forward node t's gap is t, the gap
// right before the k-th backward node (not counting recomputed nodes) is num_forward + k.
int budget_peak_gap(const TrainingGraph& tg, const Liveness& liveness);

// Empty when the programme, every gap modelled at `arena_limit`, admits the 0/1 plan `m` (its k
// fixed to m's kept nodes); else which rows reject it. A plan whose exact arena fits must be
// admitted, at no more than its recompute cost (`cost`: the programme's least cost of `m` at
// `balance`): the tests check the programme is a relaxation with it.
std::string budget_programme_rejects(const Graph& forward, const TrainingGraph& keep_all, int64_t arena_limit, const MirrorPlan& m,
                                     double* cost = nullptr, double balance = kDefaultBalance);

// The mirror plan of a 0/1 choice per compute node (views follow the node they alias).
MirrorPlan views_follow(const Graph& forward, MirrorPlan m);

}  // namespace mnemo
