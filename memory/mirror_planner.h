// Mirror planners: choose m(v) (which forward results to drop and recompute) for a forward graph,
// each candidate plan scored by the exact static memory plan of its training graph.
//   drop-bn-relu  m = 1 for every op whose traits say cheap_recompute (batch norm, ReLU, pooling);
//                 conv / fully connected outputs kept (Chen et al. Sec. 4.2)
//   sublinear     Alg. 3 over candidate cuts with the Appendix A search over the budget B
//                 (B = 0, then sqrt(x y), then 6 points on [B/sqrt2, sqrt2 B]); the least
//                 arena bytes (feature maps, gradients, workspace) win (Sec. 4.3)
//   recursive     nested mirror counts: cuts chosen by recursive bisection (k per level), a cut
//                 at level L gets m = L - 1, everything else m = depth (Sec. 4.4, g(n) = k log_{k+1} n)
//   optimal       Feng & Huang's least-objective checkpoint set on the whole DAG
//                 (memory/optimal_checkpoints.h), m in {0, 1}; the optimum and its near-optimal
//                 candidates, each also refined with several-entry segments, keeping everything
//                 and sublinear's cut plans are scored by their exact plans; the least arena wins
//   budget=SIZE   the least recompute cost (FLOPs or bytes moved, whichever bounds each recomputed
//                 op: Cost::roofline) whose exact total_bytes <= SIZE among a fixed family
//                 of plans (keep-all, drop-bn-relu, sublinear's budgets, recursive depths, the
//                 papers' max-term solutions and their refinements), each planned exactly; the
//                 family does not depend on SIZE, so a smaller SIZE never gets less recompute or
//                 a larger total
// Candidate cuts are found in the graph itself, so generic graphs work too: after each forward
// node p, the crossing set S_p = the non-leaf values computed at or before p and read after p.
// A position is a candidate when S_p's bytes are a local minimum (ResNet: residual block outputs;
// LSTM: step and layer boundaries, S = {h, c}). Keeping all of S_p separates the graph there.
// Requires: a typed forward graph. Provides: MirrorPlan + the search log. Per-node overrides
// (config `mirror: k`) are applied on top of every candidate plan.
#pragma once
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "autograd/update.h"
#include "memory/order.h"
#include "memory/report.h"

namespace mnemo {

enum class MirrorStrategy { none, drop_bn_relu, sublinear, recursive, optimal, budget };

// A memory mode (docs/MEMORY.md): allocation + mirror strategy.
// What budget=SIZE's planning learnt that holds for every SIZE of one graph and mode (the
// family's light reports, the fills' plans; memory/budget_planner.cpp): a caller planning several
// SIZEs of the same graph and mode (`mnemo curve --vary budget`) passes one through
// MemoryMode::budget_memo so they are not built again. Defined in memory/budget_fill.h.
struct BudgetMemo;
std::shared_ptr<BudgetMemo> make_budget_memo();

struct MemoryMode {
  std::string name;
  AllocMode alloc = AllocMode::share;
  MirrorStrategy mirror = MirrorStrategy::none;
  int depth = 0;  // recursive: levels (0 = enough to reach segments of one cut)
  // sublinear: Chen's plan filled at its own peak (kept back where the live bytes allow, the most
  // recompute per byte first) when that is no larger and recomputes less; false (sublinear:chen):
  // Chen's plan as his search gives it
  bool sublinear_fill = true;
  // budget: the step's total bytes may not exceed `budget_bytes` (> 0), or `budget_ratio` times
  // the total of `share`'s plan (> 0)
  int64_t budget_bytes = 0;
  double budget_ratio = 0;
  // budget: the solver. fast: the family (with the programme's LP relaxation as its bound);
  // search: the family's choice improved by the local search of memory/budget_search.h for up to
  // `budget_seconds`; exact: the local search for up to half of `budget_seconds`, then the
  // mixed-integer programme of memory/budget_exact.h for the rest, its plans checked exactly.
  // (search's and exact's answers are never worse than fast's, but they are not monotone in SIZE:
  // see docs/MEMORY.md.)
  enum class Solver { fast, search, exact } budget_solver = Solver::fast;
  double budget_seconds = 10;
  // budget, fast and search: how long the bound may take, the root's cuts and the LP's cutting
  // rounds (`:fast=SECONDS` or `:bound=SECONDS`, 0: neither); < 0: the default rounds only
  // (while the LP stays small; docs/MEMORY.md "The programme")
  double budget_bound_seconds = -1;
  // budget: the recompute cost minimised is each recomputed node's Cost::roofline at this many
  // FLOPs per byte (`:balance=B`; 0: its FLOPs alone); every mode's report uses it
  double balance = kDefaultBalance;
  // budget: fill every live-bytes level, also those whose bound shows they cannot give the choice
  // (the same choice, more work; for tests)
  bool budget_fill_every_level = false;
  // budget: keep back in the first order only (no keep-back paths or fills in the chains order,
  // docs/MEMORY.md "Two keep-back orders"; a smaller family, for tests)
  bool budget_first_order_only = false;
  // budget: the family remembers the plans it evaluated light (its members' reports and its fills'
  // plans: BudgetMemo, memory/budget_fill.h; false: each is built again: the same choice, for tests)
  bool budget_remember_fills = true;
  // budget: shared with the other SIZEs planned for the same graph, device and mode (only SIZE
  // differs); null: this plan's own
  std::shared_ptr<BudgetMemo> budget_memo;
  // The schedule order of every plan (memory/order.h), and optimal's time limit per plan.
  ScheduleOrder order = ScheduleOrder::default_order;
  double order_seconds = 10;
  // share: the exact placement of the plan chosen (memory/placement.h) for up to this long; <= 0:
  // best fit only.
  double placement_seconds = 5;
};
// none | inplace | share | drop-bn-relu | sublinear | sublinear:chen | recursive | recursive=DEPTH | optimal |
// budget=SIZE (SIZE: bytes, with an optional unit B, KB, MB, GB, TB (powers of 1000) or KiB, MiB,
// GiB, TiB (powers of 1024); or a factor of share's total like 0.5x), optionally followed by one
// of :fast, :fast=SECONDS (the time for the bound's cuts and rounds), :search, :search=SECONDS, :exact or
// :exact=SECONDS (the solver and its time limit), and by :balance=B (the cost model's FLOPs per byte), in either order
MemoryMode parse_memory_mode(const std::string& name);
// The longest time limit taken (a day): budget's :exact=SECONDS, :search=SECONDS and :fast=SECONDS, placement_seconds
// and --placement-seconds.
constexpr double kMaxTimeLimitSeconds = 86400;
// The memory modes as errors and help texts list them: "none, inplace, share, ..., optimal or
// budget=SIZE".
extern const char* const kMemoryModeNames;
// The names above without budget=SIZE (it needs a size), recursive with automatic depth.
std::vector<std::string> all_memory_modes();

struct Cut {
  int position;             // forward node after which the cut lies
  std::vector<int> keep;    // the crossing set S_p (node ids)
  int64_t bytes = 0;        // bytes of S_p
};
std::vector<Cut> find_cuts(const Graph& forward);

struct SearchStep {
  double budget = 0;             // sublinear: the budget B; optimal: the max term C
  int kept_cuts = 0;             // sublinear: cuts kept; optimal: checkpoints
  int64_t objective_bytes = -1;  // optimal: the papers' objective of the candidate (-1: not scored)
  std::string origin;            // optimal, budget: paper, refined, keep-all, sublinear, drop-bn-relu, recursive
  int64_t total_bytes = 0;       // budget: the candidate's exact total
  bool fits = false;             // budget: total_bytes <= the budget
  bool pruned = false;           // optimal, budget: not packed (optimal: its live bytes already above the best arena)
  bool too_big = false;          // budget: its live bytes alone exceed the arena limit (else, if pruned, it was not needed)
  int64_t max_live_bytes = 0;    // the live-bytes lower bound of its arena
  int64_t feature_map_bytes = 0, workspace_bytes = 0, arena_bytes = 0;
  double recompute_flops = 0, recompute_cost = 0;
  bool chosen = false;
};

struct MirrorResult {
  MirrorPlan mirror;
  TrainingGraph training;
  PlannedStep planned;
  std::vector<SearchStep> search;  // sublinear: every budget tried; optimal: every candidate scored
  double planning_seconds = 0;     // mirror search + memory planning
  // optimal: the papers' objective of their optimum and of the plan chosen (bytes), the max terms
  // tried and the division tree's size
  int64_t model_optimum = -1, model_objective = -1;
  int max_terms = 0, tree_segments = 0, pruned = 0;  // pruned: candidates not packed
  double search_seconds = 0;       // optimal: division tree + max-term loop, before exact plans
  int64_t budget_bytes = -1;       // budget: the bound the plan had to meet
  int64_t least_feasible = -1;     // budget: the least exact total among the family
  int fill_levels = 0;             // budget: live-bytes levels filled, and those below them left
  int fill_levels_skipped = 0;     //   out because no plan within them could beat the choice
  int fill_repairs = 0;            // budget: fills whose first exact plan overshot, brought within their level by a repair
  int fill_remembered = 0;         // budget: plans the family met again and did not build (BudgetMemo, memory/budget_fill.h)
  double lower_bound_cost = -1;    // budget: no plan whose total fits has a smaller recompute cost (see MEMORY.md)
  double proven_bound_cost = -1;   // budget: the same before it is capped at the plan chosen (tests check it)
  bool bound_over_01 = false;      // budget: ... no 0/1 plan (the programme's bound); else no plan at all (knapsack)
  std::string solver_status;       // budget: what the exact solver or the LP bound reached
  int solver_solves = 0, solver_cuts = 0, solver_gaps = 0;
  double solver_seconds = 0;
  // budget (:search, and :exact first): the local search from the family's choice (search_moves
  // -1: none ran): moves tried and taken, plans evaluated, whether it ended at a local optimum
  // (else at its time limit), the recompute cost it started from, seconds; fills it judged by
  // what it had learnt of them before, without planning them again (remembered)
  int search_moves = -1, search_taken = 0, search_evaluations = 0, search_remembered = 0;
  bool search_local_optimum = false;
  double search_from_cost = 0, local_search_seconds = 0;
  OrderReport order;               // the schedule order pass on the plan chosen
  // sublinear: whether the plan is Chen's filled at its own peak, and Chen's plan's total and
  // recompute (chen_total -1: sublinear:chen, or not a sublinear plan)
  bool filled = false;
  int64_t chen_total = -1;
  double chen_recompute_flops = 0, chen_recompute_cost = 0;
};

// Plans m(v) for `mode`, builds the training graph (with the optimiser update of `sgd` inside it,
// autograd/update.h; null: none, the gradients are outputs) and its memory plan. `overrides`: node
// id -> mirror count from the config, applied to every candidate.
// `device`: the backend the plans are for (its prepared kernels and workspace); null: the CPU.
MirrorResult plan_mirror(const Graph& forward, EntryRef loss, const MemoryMode& mode,
                         const std::map<int, int>& overrides, const SgdSpec* sgd, const Device* device = nullptr);

// The building blocks, exposed for tests and tools.
MirrorPlan drop_bn_relu_plan(const Graph& forward);
MirrorPlan budget_plan(const Graph& forward, const std::vector<Cut>& cuts, double budget, double* x, double* y,
                       int* kept);  // Alg. 3
// A lower bound on the recompute cost (Cost::roofline at `balance`) of any mirror plan whose
// arena fits in `arena_limit` bytes. A forward value the backward pass reads is, if kept, live when the forward pass ends
// (the schedule runs all of forward first), and, if dropped, recomputed at least once; so the
// dropped ones must cover (their bytes minus the limit), at no less than their forward cost. The
// bound is the LP relaxation of that covering knapsack. `tg` is the training graph of any plan
// (which values backward reads does not depend on the plan).
double budget_lower_bound(const Graph& forward, const TrainingGraph& tg, int64_t arena_limit, double balance = kDefaultBalance);
// The same bound prepared once (its items and pieces do not depend on the limit) and asked at
// many limits: budget's live-bytes levels.
class KnapsackBound {
 public:
  KnapsackBound(const Graph& forward, const TrainingGraph& tg, double balance);
  double at(int64_t arena_limit) const;

 private:
  double saved_ = 0;                 // the bytes of every value backward reads
  std::vector<double> bytes_, cost_;  // running sums over the pieces, cheapest cost per byte first
};

// The budgets of sublinear's search (Appendix A): B = 0, B = sqrt(x y), then 6 points on
// [B / sqrt 2, sqrt 2 B].
std::vector<double> sublinear_budgets(const Graph& forward, const std::vector<Cut>& cuts);
MirrorPlan recursive_plan(const Graph& forward, const std::vector<Cut>& cuts, int depth, int k = 1);

}  // namespace mnemo
