// budget=SIZE (memory/budget_planner.cpp): its sizes and options parse; every plan fits, the
// sweep is monotone and the tightest plan computes what `none` computes; the fill members stay
// within their levels; levels left unfilled do not change the choice; the fast solver's bound is
// the programme's LP with its cutting rounds; the cost model's balance is the objective.
#include <omp.h>

#include <algorithm>
#include <limits>
#include <map>
#include <set>
#include <tuple>

#include "autograd/update.h"
#include "memory/budget_exact.h"
#include "memory/budget_fill.h"
#include "mirror_models.h"

namespace mnemo::test {
namespace {

// A fill member's origin: fill or fill+cheap (its start), +chains (its keep-back order).
bool is_fill(const std::string& origin) { return origin.rfind("fill", 0) == 0; }

// The plans of a budget sweep, from the largest budget down: each within its budget, with no less
// recompute and no larger total than the plan before it.
struct MonotoneSweep {
  double last_recompute = -1;
  int64_t last_total = INT64_MAX;
  void check(const MirrorResult& r, const std::string& what) {
    EXPECT_LE(r.planned.report.total_bytes, r.budget_bytes) << what;
    EXPECT_GE(r.planned.report.recompute_cost, last_recompute) << what;
    EXPECT_LE(r.planned.report.total_bytes, last_total) << what;
    last_recompute = r.planned.report.recompute_cost, last_total = r.planned.report.total_bytes;
  }
};

// A 2-layer, 64-wide LSTM unrolled 16 steps on 20-dimensional inputs (the budget sweeps' LSTM):
// a loss at every step or at the last, over `classes` classes, batch `batch`; a classifier and a
// loss per step (head: ops).
Config sweep_lstm(bool per_step, int classes, int batch) {
  return parse_config("model: {type: lstm, layers: 2, hidden: 64, steps: 16, head: ops, per_step: " + std::string(per_step ? "true" : "false") +
                          "}\ndata: {source: synthetic-seq, shape: [16, 20], classes: " + std::to_string(classes) +
                          ", batch: " + std::to_string(batch) + "}\ntrain: {steps: 1}\n",
                      "lstm.yaml");
}

// ResNet-56 at batch 8 (plain activations) and budget's plan at `sublinear`'s total.
Config resnet56_b8() {
  Config c = load_config(MNEMO_SOURCE_DIR "/configs/resnet56-cifar.yaml");
  c.data.batch = 8;
  c.resnet.layout = "plain";
  return c;
}
struct SublinearsTotal {
  Config c = resnet56_b8();
  Pipeline p = build_pipeline(c, static_data_shape(c), c.data.batch);
  int64_t sub = plan_pipeline(c, p, "sublinear", nullptr, true).planned.report.total_bytes;
  MirrorResult b = plan_pipeline(c, p, "budget=" + std::to_string(sub), nullptr, true);
};

// The fast solver's proven bound is the programme's LP relaxation, above the covering-knapsack
// bound on ResNet-56 at sublinear's total (+9% at batch 64: 6.12 against 5.62 GFLOP). Until run_milp
// read an LP's solution, the LP's bound was silently 0 and only the knapsack bound was reported;
// this fails then.
TEST(MirrorPlanner, BudgetFastBoundIsTheProgrammesLp) {
  const SublinearsTotal fixture;
  const auto& [c, p, sub, b] = fixture;
  ASSERT_LE(b.planned.report.total_bytes, sub);
  EXPECT_NE(b.solver_status.find("programme lp"), std::string::npos) << b.solver_status;
  EXPECT_TRUE(b.bound_over_01);
  TrainingGraph tg = build_training_graph(p.model.builder.graph(), p.model.loss, {});
  add_sgd_updates(tg, {c.optimizer.momentum, c.optimizer.weight_decay});
  const int64_t arena_limit = sub - (b.planned.report.total_bytes - b.planned.report.arena_bytes);
  const double knapsack = budget_lower_bound(p.model.builder.graph(), tg, arena_limit);
  std::printf("ResNet-56 b8 at sublinear's %lld bytes: LP bound %.4g, knapsack %.4g, chosen %.4g (recompute cost)\n",
              static_cast<long long>(sub), b.lower_bound_cost, knapsack, b.planned.report.recompute_cost);
  EXPECT_GT(knapsack, 0);
  EXPECT_GT(b.lower_bound_cost, knapsack * 1.02);
  EXPECT_LE(b.lower_bound_cost, b.planned.report.recompute_cost);
  // The LP's cutting rounds (gaps its solution overfills, modelled and solved again) only add rows:
  // with none (`:fast=0`) the bound is the first LP's, with time for them it is at least that, the
  // same plan is chosen either way.
  const MirrorResult none = plan_pipeline(c, p, "budget=" + std::to_string(sub) + ":fast=0", nullptr, true);
  const MirrorResult more = plan_pipeline(c, p, "budget=" + std::to_string(sub) + ":fast=5", nullptr, true);
  std::printf("  bound without rounds %.4g (%d solves), with up to 5 s of them %.4g (%d solves, %s)\n", none.lower_bound_cost,
              none.solver_solves, more.lower_bound_cost, more.solver_solves, more.solver_status.c_str());
  EXPECT_EQ(none.solver_solves, 1);
  EXPECT_GT(more.solver_solves, 1);
  // The default rounds stop at the LP size cap or when every gap fits, so at no more rounds than
  // 5 s give; with the costs FLOPs alone (`:balance=0`) the cap stops them first here.
  EXPECT_GT(b.solver_solves, 1);
  EXPECT_LE(b.solver_solves, more.solver_solves);
  const MirrorResult capped = plan_pipeline(c, p, "budget=" + std::to_string(sub) + ":balance=0", nullptr, true);
  const MirrorResult uncapped = plan_pipeline(c, p, "budget=" + std::to_string(sub) + ":fast=5:balance=0", nullptr, true);
  EXPECT_GT(capped.solver_solves, 1);
  EXPECT_LT(capped.solver_solves, uncapped.solver_solves);
  EXPECT_LE(b.lower_bound_cost, more.lower_bound_cost * (1 + 1e-9));
  EXPECT_GE(more.lower_bound_cost, none.lower_bound_cost * (1 - 1e-9));
  EXPECT_LE(more.lower_bound_cost, more.planned.report.recompute_cost);
  EXPECT_EQ(more.planned.report.recompute_cost, none.planned.report.recompute_cost);
  EXPECT_EQ(more.planned.report.total_bytes, none.planned.report.total_bytes);
  // `:exact` runs the same rounds first and starts its programme from their gaps: its bound is
  // at least the fast one's (before, its programme started from 16 gaps of its own and proved less
  // on ResNet-56 b64 in 60 s: 6.55 against the rounds' 6.74 GFLOP).
  const MirrorResult exact = plan_pipeline(c, p, "budget=" + std::to_string(sub) + ":exact=3", nullptr, true);
  std::printf("  :exact=3: bound %.4g, plan %.4g (%s)\n", exact.lower_bound_cost, exact.planned.report.recompute_cost,
              exact.solver_status.c_str());
  EXPECT_GE(exact.lower_bound_cost, b.lower_bound_cost * (1 - 1e-9));
  EXPECT_LE(exact.lower_bound_cost, exact.planned.report.recompute_cost * (1 + 1e-9));
  EXPECT_LE(exact.planned.report.recompute_cost, b.planned.report.recompute_cost);
}

// The root node of the integer programme (CBC's cutting planes on the LP, no heuristics, no
// branching) as a bound beside the LP's, with `:fast=SECONDS` (first, before the rounds, and again
// after them), not by default. On the same gaps (here no rounds: the starting ones) its bound is
// above the LP's (the cuts only add rows) and is a bound: never above a plan that fits (the small
// nets' enumeration, BudgetExact.MatchesEnumerationOfEveryPlanOnSmallNets, checks it against every
// plan).
TEST(MirrorPlanner, BudgetRootCutsRaiseTheLpBound) {
  const SublinearsTotal fixture;
  const auto& [c, p, sub, b] = fixture;
  const Graph& fwd = p.model.builder.graph();
  TrainingGraph tg = build_training_graph(fwd, p.model.loss, {});
  add_sgd_updates(tg, {c.optimizer.momentum, c.optimizer.weight_decay});
  ExactBudgetOptions o;
  o.arena_limit = sub - (b.planned.report.total_bytes - b.planned.report.arena_bytes);
  o.integer = false;
  o.max_gaps = 2;
  o.lp_rounds = 0;  // the first LP alone
  o.lp_round_seconds = 5;
  o.incumbent_cost = b.planned.report.recompute_cost;
  auto no_check = [](const MirrorPlan&) -> BudgetCheck { throw Error("the LP bound plans nothing"); };
  const ExactBudget lp = solve_budget_exact(fwd, tg, o, no_check);
  o.root = ExactBudgetOptions::Root::first;
  const ExactBudget root = solve_budget_exact(fwd, tg, o, no_check);
  std::printf("ResNet-56 b8 at sublinear's %lld bytes: LP bound %.5g (%s), with the root's cuts %.5g (%s); plan %.5g\n",
              static_cast<long long>(sub), lp.bound_cost, lp.status.c_str(), root.bound_cost, root.status.c_str(),
              b.planned.report.recompute_cost);
  EXPECT_EQ(lp.status, "lp");
  EXPECT_EQ(lp.solves, 1);
  EXPECT_EQ(root.status, "lp, root cuts");
  EXPECT_EQ(root.solves, 2);
  EXPECT_GT(lp.bound_cost, 0);
  EXPECT_GT(root.bound_cost, lp.bound_cost * 1.01);
  EXPECT_EQ(root.bound_cost, root.root_bound_cost);
  EXPECT_EQ(lp.root_bound_cost, 0);
  EXPECT_LE(root.bound_cost, b.planned.report.recompute_cost * (1 + 1e-9));
  // `:exact` takes the root after its LP rounds (here none: the first LP alone, on the same gaps),
  // before its own solves: its bound is at least the root's there (the same programme). The plans
  // its solves find are refused here: only the bound is looked at.
  o.integer = true;
  o.lp_rounds = 1;
  o.lp_round_columns = 1;
  o.lp_round_seconds = 0;
  o.lp_max_gaps = 2;
  o.seconds = 3;
  o.root = ExactBudgetOptions::Root::after_rounds;
  const ExactBudget ex = solve_budget_exact(fwd, tg, o, [](const MirrorPlan&) { return BudgetCheck{}; });
  std::printf("  the exact solver with the root after its LP: the root's bound %.5g, the bound %.5g (%s, %d solves, %d gaps, %d cuts)\n",
              ex.root_bound_cost, ex.bound_cost, ex.status.c_str(), ex.solves, ex.gaps, ex.cuts);
  EXPECT_NEAR(ex.root_bound_cost, root.root_bound_cost, 1e-6 * root.root_bound_cost);
  // Each plan refused here brings in the gaps the programme's own accounting of its solution
  // overfills (up to 8 a solution): before, only the gap where the plan peaked was added (none
  // here), and the programme stayed on its first gaps (lp.gaps, the same start).
  EXPECT_GT(ex.cuts, 0);
  EXPECT_GT(ex.gaps, lp.gaps) << "the starting gaps: " << lp.gaps;
  EXPECT_GE(ex.bound_cost, ex.root_bound_cost);
  // The default takes no root.
  EXPECT_EQ(b.solver_status.find("root"), std::string::npos) << b.solver_status;
  // `:fast=SECONDS`: the root first, then the rounds by time; the bound is at least the default's
  // when the rounds reach every gap (here they do), and the plan is the same.
  const MirrorResult f = plan_pipeline(c, p, "budget=" + std::to_string(sub) + ":fast=5", nullptr, true);
  std::printf("  :fast=5: bound %.5g (%s, %d solves); default %.5g (%s)\n", f.lower_bound_cost, f.solver_status.c_str(),
              f.solver_solves, b.lower_bound_cost, b.solver_status.c_str());
  EXPECT_NE(f.solver_status.find("root cuts"), std::string::npos) << f.solver_status;
  EXPECT_GE(f.lower_bound_cost, b.lower_bound_cost * (1 - 1e-9));
  EXPECT_EQ(f.planned.report.recompute_cost, b.planned.report.recompute_cost);
}

// The cost model's balance (`:balance=B`) is budget's objective. On ResNet-56 b8 the plans chosen
// with B = 0 (FLOPs alone) and B = 10 (the default) differ at some of these budgets (0.4x and 0.85x
// were added on 2026-11-28, when batch norms' cheaper recompute left one cross comparison among the
// other three); at each, the
// B = 10 plan re-costed at B = 10 costs no more than the B = 0 plan does there, and the B = 0 plan
// recomputes no more FLOPs than the B = 10 one, wherever the other plan is in the family too (the
// families' keep-back orders follow their balance's cost; at 0.3x the B = 10 family holds a plan of
// fewer FLOPs than any the B = 0 family has). A report's cost is its nodes' rooflines.
TEST(MirrorPlanner, BudgetMinimisesTheCostOfItsBalance) {
  Config c = load_config(MNEMO_SOURCE_DIR "/configs/resnet56-cifar.yaml");
  c.data.batch = 8;
  c.resnet.layout = "plain";
  const Pipeline p = build_pipeline(c, static_data_shape(c), c.data.batch);
  const Graph& fwd = p.model.builder.graph();
  auto cost_at = [&](const MirrorPlan& m, double balance) {
    return plan_training_step(build_training_graph(fwd, p.model.loss, m), AllocMode::share, {.balance = balance}).report;
  };
  int differ = 0, crossed = 0;
  for (const std::string r : {"0.3x", "0.4x", "0.55x", "0.7x", "0.85x"}) {
    const MirrorResult f = plan_pipeline(c, p, "budget=" + r + ":balance=0", nullptr, true);
    const MirrorResult t = plan_pipeline(c, p, "budget=" + r, nullptr, true);
    EXPECT_EQ(f.planned.report.balance, 0.0);
    EXPECT_EQ(t.planned.report.balance, kDefaultBalance);
    EXPECT_EQ(f.planned.report.recompute_cost, f.planned.report.recompute_flops) << r;
    const MemoryReport t10 = cost_at(t.mirror, kDefaultBalance), f10 = cost_at(f.mirror, kDefaultBalance);
    EXPECT_DOUBLE_EQ(t10.recompute_cost, t.planned.report.recompute_cost) << r;
    EXPECT_GE(t10.recompute_cost, t10.recompute_flops) << r;
    std::printf("budget=%s: balance 0 plan %.4g GFLOP, cost at 10 %.4g G; balance 10 plan %.4g GFLOP, cost %.4g G\n", r.c_str(),
                f.planned.report.recompute_flops / 1e9, f10.recompute_cost / 1e9, t.planned.report.recompute_flops / 1e9,
                t.planned.report.recompute_cost / 1e9);
    // Each choice is the least of its own family by its own objective; the families differ (their
    // keep-back orders are by each balance's cost), so the cross comparison holds where the other
    // plan is a member of the family too (same recompute FLOPs and live bytes).
    auto member_of = [](const MirrorResult& family, const MemoryReport& plan) {
      return std::any_of(family.search.begin(), family.search.end(), [&](const SearchStep& st) {
        return st.recompute_flops == plan.recompute_flops && st.max_live_bytes == plan.max_live_bytes;
      });
    };
    if (member_of(t, f.planned.report)) {
      EXPECT_LE(t.planned.report.recompute_cost, f10.recompute_cost * (1 + 1e-12)) << r;
      ++crossed;
    }
    if (member_of(f, t.planned.report)) {
      EXPECT_LE(f.planned.report.recompute_flops, t.planned.report.recompute_flops * (1 + 1e-12)) << r;
      ++crossed;
    }
    differ += f.mirror != t.mirror;
  }
  EXPECT_GT(differ, 0);
  EXPECT_GE(crossed, 2) << "too few plans were members of the other balance's family to compare";
  // Each recomputed node costs max(FLOPs, B x bytes): at B = 0 the FLOPs, and the cost grows with B.
  const MirrorResult sub = plan_pipeline(c, p, "sublinear", nullptr, false);
  double expect = 0;
  const Graph& g = sub.training.graph;
  for (size_t v = 0; v < g.size(); ++v)
    if (g.node(static_cast<int>(v)).role == NodeRole::recompute) {
      const Cost k = node_cost(g, static_cast<int>(v));
      expect += std::max(k.flops, 10.0 * k.bytes);
    }
  EXPECT_GT(expect, sub.planned.report.recompute_flops);
  EXPECT_DOUBLE_EQ(cost_at(sub.mirror, 10.0).recompute_cost, expect);
  EXPECT_EQ(cost_at(sub.mirror, 0.0).recompute_cost, sub.planned.report.recompute_flops);
  EXPECT_GT(cost_at(sub.mirror, 100.0).recompute_cost, expect);
}

// The LP's rounds end when its solution fits every gap (its bound is then the LP's with every gap
// modelled): on the test LSTM at 0.5x after one round.
TEST(MirrorPlanner, BudgetLpRoundsEndWhenEveryGapFits) {
  const Config c = model_config(1);
  const Pipeline p = build_pipeline(c, static_data_shape(c), c.data.batch);
  const MirrorResult r = plan_pipeline(c, p, "budget=0.5x", nullptr, true);
  EXPECT_NE(r.solver_status.find("lp, every gap"), std::string::npos) << r.solver_status;
  EXPECT_EQ(r.solver_solves, 2);
  EXPECT_LE(r.lower_bound_cost, r.planned.report.recompute_cost);
}

TEST(MirrorPlanner, BudgetSizesParse) {
  EXPECT_EQ(parse_memory_mode("budget=2GiB").budget_bytes, int64_t{2} << 30);
  EXPECT_EQ(parse_memory_mode("budget=900MB").budget_bytes, 900000000);
  EXPECT_EQ(parse_memory_mode("budget=123456789").budget_bytes, 123456789);
  EXPECT_EQ(parse_memory_mode("budget=1.5 KiB").budget_bytes, 1536);
  EXPECT_EQ(parse_memory_mode("budget=0.5x").budget_ratio, 0.5);
  EXPECT_EQ(parse_memory_mode("budget=0.5x").mirror, MirrorStrategy::budget);
  EXPECT_EQ(parse_memory_mode("budget=2GiB").budget_solver, MemoryMode::Solver::fast);
  EXPECT_EQ(parse_memory_mode("budget=2GiB:fast").budget_solver, MemoryMode::Solver::fast);
  EXPECT_EQ(parse_memory_mode("budget=2GiB:exact").budget_solver, MemoryMode::Solver::exact);
  EXPECT_EQ(parse_memory_mode("budget=2GiB:exact").budget_seconds, 10.0);
  EXPECT_EQ(parse_memory_mode("budget=0.5x:exact=2.5").budget_seconds, 2.5);
  EXPECT_EQ(parse_memory_mode("budget=0.5x:exact=2.5").budget_ratio, 0.5);
  EXPECT_EQ(parse_memory_mode("budget=2GiB").budget_bound_seconds, -1.0);
  EXPECT_EQ(parse_memory_mode("budget=0.5x:fast=3").budget_bound_seconds, 3.0);
  EXPECT_EQ(parse_memory_mode("budget=0.5x:fast=0").budget_bound_seconds, 0.0);
  EXPECT_EQ(parse_memory_mode("budget=0.5x:fast=3").budget_solver, MemoryMode::Solver::fast);
  EXPECT_EQ(parse_memory_mode("budget=2GiB").balance, kDefaultBalance);
  EXPECT_EQ(parse_memory_mode("budget=2GiB:balance=4").balance, 4.0);
  EXPECT_EQ(parse_memory_mode("budget=2GiB:balance=0").balance, 0.0);
  EXPECT_EQ(parse_memory_mode("budget=2GiB:search").budget_solver, MemoryMode::Solver::search);
  EXPECT_EQ(parse_memory_mode("budget=2GiB:search").budget_seconds, 10.0);
  EXPECT_EQ(parse_memory_mode("budget=0.5x:search=2.5").budget_seconds, 2.5);
  EXPECT_EQ(parse_memory_mode("budget=0.5x:search=2.5").budget_solver, MemoryMode::Solver::search);
  EXPECT_EQ(parse_memory_mode("budget=0.5x:balance=0:search=4").balance, 0.0);
  // :bound=SECONDS: the bound's time, with :search (or :fast, the same as :fast=SECONDS)
  for (const char* both : {"budget=0.5x:search=4:bound=2", "budget=0.5x:bound=2:search=4", "budget=0.5x:bound=2:balance=1:search=4"}) {
    const MemoryMode m = parse_memory_mode(both);
    EXPECT_EQ(m.budget_solver, MemoryMode::Solver::search) << both;
    EXPECT_EQ(m.budget_seconds, 4.0) << both;
    EXPECT_EQ(m.budget_bound_seconds, 2.0) << both;
  }
  EXPECT_EQ(parse_memory_mode("budget=0.5x:search:bound=0").budget_bound_seconds, 0.0);
  EXPECT_EQ(parse_memory_mode("budget=0.5x:bound=3").budget_bound_seconds, 3.0);
  EXPECT_EQ(parse_memory_mode("budget=0.5x:bound=3").budget_solver, MemoryMode::Solver::fast);
  EXPECT_EQ(parse_memory_mode("budget=0.5x:fast:bound=3").budget_bound_seconds, 3.0);
  for (const char* both : {"budget=0.5x:exact=3:balance=2.5", "budget=0.5x:balance=2.5:exact=3"}) {
    const MemoryMode m = parse_memory_mode(both);
    EXPECT_EQ(m.balance, 2.5) << both;
    EXPECT_EQ(m.budget_solver, MemoryMode::Solver::exact) << both;
    EXPECT_EQ(m.budget_seconds, 3.0) << both;
    EXPECT_EQ(m.budget_ratio, 0.5) << both;
  }
  for (const char* bad : {"budget=", "budget=-1", "budget=0", "budget=2QB", "budget=nan", "budget=1e30", "budget=x", "budget=0x",
                          "budget=1GiB:", "budget=1GiB:slow", "budget=1GiB:exact=", "budget=1GiB:exact=0", "budget=1GiB:exact=5s",
                          "budget=:exact", "budget=1GiB:fast=", "budget=1GiB:fast=-1", "budget=1GiB:fast=2s", "budget=1GiB:fast=inf",
                          "budget=1GiB:balance=", "budget=1GiB:balance=-1", "budget=1GiB:balance=nan", "budget=1GiB:balance=2x",
                          "budget=1GiB:balance=1:balance=2", "budget=1GiB:exact:fast", "budget=:balance=1", "budget=1GiB::balance=1",
                          "budget=1.5", "budget=1.5B", "budget=0x1000", "budget=1e19", "budget=2EiB", "budget=inf",
                          "budget=1GiB:search=", "budget=1GiB:search=0", "budget=1GiB:search=-2", "budget=1GiB:search=1e9",
                          "budget=1GiB:search:exact", "budget=1GiB:fast:search", "budget=1GiB:searches",
                          "budget=1GiB:bound=", "budget=1GiB:bound=-1", "budget=1GiB:bound=2s", "budget=1GiB:search:bound=1:bound=2",
                          "budget=1GiB:fast=1:bound=2", "budget=1GiB:exact:bound=2", "budget=1GiB:bound=2:exact=3", "budget=1GiB:bounds=2"})
    EXPECT_NE(error_of([&] { parse_memory_mode(bad); }).find("expected budget=SIZE"), std::string::npos) << bad;
  // The message names the part that is wrong.
  const std::pair<const char*, const char*> named[] = {
      {"budget=1.5", "SIZE '1.5' is not a whole number of bytes"},  // (was taken as 1 byte)
      {"budget=0x1000", "SIZE '0x1000' is not positive"},           // (std::stod read hexadecimal: 4096 bytes)
      {"budget=2QB", "unknown unit 'QB'"},
      {"budget=1GiB:exact=abc", "':exact=abc' is not a number"},
      {"budget=1GiB:fast=-3", "':fast=-3': SECONDS must be a number in [0, 86400]"},
      {"budget=1GiB:exact=0", "':exact=0': the exact solver needs SECONDS > 0"},
      {"budget=1GiB:balance=nan", "':balance=nan' is not a number"},
      {"budget=1GiB:balance=1:balance=2", "':balance' given twice"},
      {"budget=1GiB:exact:fast", "a second solver option"},
      {"budget=1GiB:search=0", "':search=0': the local search needs SECONDS > 0"},
      {"budget=1GiB:search=1e9", "':search=1e9': SECONDS must be a number in [0, 86400]"},
      {"budget=1GiB:search:exact", "a second solver option (one of :fast, :search or :exact)"},
      {"budget=1GiB:slow", "unknown option ':slow'"},
      {"budget=1GiB:bound=x", "':bound=x' is not a number"},
      {"budget=1GiB:search:bound=1:bound=2", "':bound' given twice"},
      {"budget=1GiB:bound=2:fast=1", "':bound=SECONDS' and ':fast=SECONDS' both set the bound's time"},
      {"budget=1GiB:exact:bound=2", "':bound=SECONDS' with :exact"}};
  for (const auto& [bad, why] : named) EXPECT_NE(error_of([&] { parse_memory_mode(bad); }).find(why), std::string::npos) << bad;
  EXPECT_EQ(parse_memory_mode("budget=1PiB").budget_bytes, int64_t{1} << 50);
  EXPECT_EQ(parse_memory_mode("budget=2.5MiB").budget_bytes, 2621440);
  EXPECT_EQ(parse_memory_mode("budget=1.5 GiB").budget_bytes, 1610612736);
}

// A sweep of budgets from share's total down to the least feasible one: the chosen plan always
// fits, its recompute never falls and its total never rises as the budget shrinks (monotone by
// construction: one family per graph), its results are bitwise those of `none`, and a budget
// below the least feasible is an error naming that size.
TEST(MirrorPlanner, BudgetIsMonotoneFitsAndNamesTheLeastFeasibleSize) {
  for (int i : {0, 1, 4}) {  // ResNet, the LSTM, DenseNet-121
    const Config c = model_config(i);
    const Pipeline p = build_pipeline(c, static_data_shape(c), c.data.batch);
    const MirrorResult top = plan_pipeline(c, p, "budget=1x");
    const int64_t share_total = plan_pipeline(c, p, "share").planned.report.total_bytes;
    EXPECT_EQ(top.planned.report.recompute_cost, 0.0) << "the whole of share's total needs no recompute";
    EXPECT_EQ(top.budget_bytes, share_total) << "budget=1x is share's total";
    EXPECT_LE(top.planned.report.total_bytes, share_total);
    const int64_t least = top.least_feasible;
    ASSERT_GT(least, 0);
    ASSERT_LT(least, share_total) << kModels[i];
    double last_recompute = -1;
    int64_t last_total = INT64_MAX;
    const int points = 9;
    for (int k = 0; k < points; ++k) {
      const int64_t b = share_total - (share_total - least) * k / (points - 1);
      const MirrorResult r = plan_pipeline(c, p, "budget=" + std::to_string(b));
      EXPECT_LE(r.planned.report.total_bytes, b) << kModels[i] << " budget " << b;
      EXPECT_GE(r.planned.report.recompute_cost, last_recompute) << kModels[i] << " budget " << b;
      EXPECT_LE(r.planned.report.total_bytes, last_total) << kModels[i] << " budget " << b;
      // The log agrees with the lazy packing: a packed member fits exactly when its total does; one
      // left unpacked though its live bytes fit recomputes no less than the chosen plan; the
      // programme's 0/1 bound is never claimed for a plan that recomputes a node twice.
      for (const SearchStep& st : r.search) {
        if (!st.pruned) { EXPECT_EQ(st.fits, st.total_bytes <= b) << kModels[i] << " " << st.origin; }
        if (st.pruned && !st.too_big) { EXPECT_GE(st.recompute_cost, r.planned.report.recompute_cost) << kModels[i] << " " << st.origin; }
      }
      if (std::any_of(r.mirror.begin(), r.mirror.end(), [](int k) { return k > 1; })) { EXPECT_FALSE(r.bound_over_01); }
      last_recompute = r.planned.report.recompute_cost;
      last_total = r.planned.report.total_bytes;
    }
    EXPECT_GT(last_recompute, 0.0) << kModels[i] << ": the tightest budget needs recomputation";
    // The tightest plan computes what `none` computes.
    const Outputs ref = step(c, p, plan_pipeline(c, p, "none", nullptr, true));
    const Outputs o = step(c, p, plan_pipeline(c, p, "budget=" + std::to_string(least), nullptr, true));
    ASSERT_EQ(o.values.size(), ref.values.size());
    for (size_t k = 0; k < o.values.size(); ++k) EXPECT_TRUE(bitwise_equal(o.values[k], ref.values[k])) << kModels[i] << " output " << k;
    const std::string err = error_of([&] { plan_pipeline(c, p, "budget=" + std::to_string(least - 1)); });
    EXPECT_NE(err.find("the least total found is"), std::string::npos) << err;
    EXPECT_NE(err.find("budget=" + std::to_string(least)), std::string::npos) << err;
  }
}

// budget=SIZE at `share`'s own total recomputes nothing, and budget=1x is that total: keep-all is
// planned as `share` plans it (its exact placement), not by its best-fit packing, which is above
// it on these ResNets (the budget at share's total chose a plan recomputing 4.1%: found by a
// hunt). Which of them has best fit above the exact placement depends on the convolutions'
// workspaces, which depend on the CPU's oneDNN formats (the first on AVX-512; on an AVX2-only CPU
// the second, found by a hunt over widths, batches and layouts on 2026-11-29): the first such is
// tested.
TEST(MirrorPlanner, BudgetAtSharesOwnTotalRecomputesNothing) {
  auto config = [](const std::string& model) {
    return parse_config("model: {type: resnet, style: cifar, depth: 8, " + model +
                            "}\ndata: {source: synthetic, shape: [3, 16, 16], classes: 5, batch: 4, size: 64}\ntrain: {steps: 1}\n",
                        "r8.yaml");
  };
  std::string found;
  for (const char* model : {"width: 4", "width: 8, layout: plain", "width: 12", "width: 16"}) {
    Config c = config(model);
    const Pipeline p = build_pipeline(c, static_data_shape(c), c.data.batch);
    const int64_t exact = plan_pipeline(c, p, "share").planned.report.total_bytes;
    c.placement_seconds = 0;
    if (plan_pipeline(c, p, "share").planned.report.total_bytes > exact) {
      found = model;
      break;
    }
  }
  ASSERT_FALSE(found.empty()) << "no case with a best-fit packing above the exact one: the test shows nothing";
  const Config c = config(found);
  const Pipeline p = build_pipeline(c, static_data_shape(c), c.data.batch);
  const int64_t share_total = plan_pipeline(c, p, "share").planned.report.total_bytes;
  const MirrorResult at = plan_pipeline(c, p, "budget=" + std::to_string(share_total));
  EXPECT_EQ(at.planned.report.recompute_cost, 0.0);
  EXPECT_EQ(at.planned.report.total_bytes, share_total);
  const MirrorResult one = plan_pipeline(c, p, "budget=1x");
  EXPECT_EQ(one.budget_bytes, share_total);
  EXPECT_EQ(one.planned.report.recompute_cost, 0.0);
  EXPECT_GT(plan_pipeline(c, p, "budget=" + std::to_string(share_total - 1)).planned.report.recompute_cost, 0.0);
}

// Fill members (docs/MEMORY.md "The family"): a plan filled up to a level has live bytes within it,
// the plan chosen at a member's own total never recomputes more than that member, a chosen fill
// member of each start computes bitwise what `none` computes, and a dense sweep (fills come and go
// with the levels below the limit) stays monotone.
TEST(MirrorPlanner, BudgetFillsStayWithinTheirLevelAndTheSweepStaysMonotone) {
  std::map<std::string, int> chosen_of;  // fill origin -> budgets (of both models) that chose one
  for (int i : {0, 4}) {  // ResNet, DenseNet-121
    const Config c = model_config(i);
    const Pipeline p = build_pipeline(c, static_data_shape(c), c.data.batch);
    // (Chen's plan, a member of the family; `sublinear`'s fill at its own peak is not one, and
    // budget at its total may recompute more: on this ResNet since batch norms are recomputed
    // from their saved statistics, 1.75e6 against the fill's 1.67e6)
    const MirrorResult sub = plan_pipeline(c, p, "sublinear:chen");
    const MirrorResult at_sub = plan_pipeline(c, p, "budget=" + std::to_string(sub.planned.report.total_bytes));
    EXPECT_LE(at_sub.planned.report.recompute_cost, sub.planned.report.recompute_cost) << kModels[i];
    const int64_t share_total = plan_pipeline(c, p, "share").planned.report.total_bytes;
    const int64_t least = at_sub.least_feasible;
    double last_recompute = -1;
    int64_t last_total = INT64_MAX;
    int fills = 0;
    std::set<std::string> ran;  // the starts whose chosen fill ran
    // What makes the choice monotone: a fill a larger budget's family has and a smaller one's has
    // not does not fit the smaller one (its live bytes exceed the smaller one's arena limit).
    using FillKey = std::tuple<std::string, double, int64_t, double>;  // origin, level, live bytes, recompute
    std::vector<std::set<FillKey>> larger;                             // the fills of each budget above
    int only_larger = 0;
    const int points = 12;
    for (int k = 0; k < points; ++k) {
      const int64_t b = share_total - (share_total - least) * k / (points - 1);
      const MirrorResult r = plan_pipeline(c, p, "budget=" + std::to_string(b), nullptr, true);
      EXPECT_LE(r.planned.report.total_bytes, b) << kModels[i] << " budget " << b;
      EXPECT_GE(r.planned.report.recompute_cost, last_recompute) << kModels[i] << " budget " << b;
      EXPECT_LE(r.planned.report.total_bytes, last_total) << kModels[i] << " budget " << b;
      last_recompute = r.planned.report.recompute_cost, last_total = r.planned.report.total_bytes;
      std::set<FillKey> mine;
      for (const SearchStep& st : r.search)
        if (is_fill(st.origin)) mine.insert({st.origin, st.budget, st.max_live_bytes, st.recompute_cost});
      const int64_t arena_limit = b - (r.planned.report.total_bytes - r.planned.report.arena_bytes);
      for (const std::set<FillKey>& above : larger)
        for (const FillKey& f : above)
          if (!mine.count(f)) {
            ++only_larger;
            EXPECT_GT(std::get<2>(f), arena_limit) << kModels[i] << " budget " << b << ": a larger budget's fill at level " << std::get<1>(f)
                                                   << " fits it but is not in its family";
          }
      larger.push_back(std::move(mine));
      for (const SearchStep& st : r.search) {
        if (!is_fill(st.origin)) continue;
        ++fills;
        EXPECT_LE(st.max_live_bytes, static_cast<int64_t>(st.budget)) << kModels[i] << ": a fill stays within its level";
        if (!st.chosen) continue;
        ++chosen_of[st.origin];
        if (!ran.insert(st.origin).second) continue;  // one chosen fill per start and model runs
        const Outputs ref = step(c, p, plan_pipeline(c, p, "none", nullptr, true));
        const Outputs o = step(c, p, r);
        ASSERT_EQ(o.values.size(), ref.values.size());
        for (size_t v = 0; v < o.values.size(); ++v)
          EXPECT_TRUE(bitwise_equal(o.values[v], ref.values[v])) << kModels[i] << " " << st.origin << " budget " << b << " output " << v;
      }
    }
    std::printf("%s: %d fill members over %d budgets; %d (budget, fill of a larger budget's family only) pairs checked\n", kModels[i].c_str(),
                fills, points, only_larger);
    EXPECT_GT(only_larger, 0) << kModels[i];
    EXPECT_GT(fills, 0) << kModels[i];
    EXPECT_FALSE(ran.empty()) << kModels[i] << ": no budget of the sweep chose a fill member";
  }
  std::printf("chosen: %d fill, %d fill+cheap, %d fill+chains, %d fill+cheap+chains\n", chosen_of["fill"], chosen_of["fill+cheap"],
              chosen_of["fill+chains"], chosen_of["fill+cheap+chains"]);
  EXPECT_GT(chosen_of["fill"] + chosen_of["fill+chains"], 0) << "no budget chose a fill from a member as it is";
  EXPECT_GT(chosen_of["fill+cheap"] + chosen_of["fill+cheap+chains"], 0) << "no budget chose a fill from the start with the cheap nodes dropped";
}

// Fills and keep-back paths keep back in two orders: by each node's own recompute cost per byte,
// and (+chains) with the cost of the recomputed copies that only it needs added (an LSTM's gate
// products, recomputed only to recompute the split of the gates: keeping the split back saves
// them, though the split itself costs a memory pass). On an LSTM with a loss at every step the
// second order gives plans the first does not: some budget of the sweep chooses one that
// recomputes less than every member that fits without it, and that plan computes bitwise what
// `none` computes. (Without the charges the two orders are one, and no member is named +chains:
// this fails.) The sweep stays monotone.
TEST(MirrorPlanner, BudgetFillsCountTheRecomputeChainsTheyEnd) {
  const Config c = sweep_lstm(true, 500, 32);
  const Pipeline p = build_pipeline(c, static_data_shape(c), c.data.batch);
  MonotoneSweep sweep;
  int better = 0, chains = 0;
  bool ran = false;
  for (const char* ratio : {"0.8x", "0.7x", "0.6x", "0.5x", "0.45x", "0.4x"}) {
    const MirrorResult r = plan_pipeline(c, p, std::string("budget=") + ratio, nullptr, true);
    sweep.check(r, ratio);
    const auto chosen = std::find_if(r.search.begin(), r.search.end(), [](const SearchStep& st) { return st.chosen; });
    ASSERT_NE(chosen, r.search.end()) << ratio;
    const bool by_chains = chosen->origin.find("+chains") != std::string::npos;
    double least_other = std::numeric_limits<double>::infinity();  // the least recompute among other members that fit
    for (const SearchStep& st : r.search) {
      chains += st.origin.find("+chains") != std::string::npos;
      const bool fits_other = st.origin.find("+chains") == std::string::npos && st.max_live_bytes <= r.planned.report.arena_bytes;
      if (fits_other && !st.pruned && st.fits) least_other = std::min(least_other, st.recompute_cost);
      // A member not packed (its total unknown) may still fit: its recompute counts too.
      if (fits_other && st.pruned && !st.too_big) least_other = std::min(least_other, st.recompute_cost);
    }
    std::printf("%s: chosen %s, recompute cost %.4g G; least without +chains %.4g G\n", ratio, chosen->origin.c_str(),
                r.planned.report.recompute_cost / 1e9, least_other / 1e9);
    if (!by_chains || r.planned.report.recompute_cost >= least_other) continue;
    ++better;
    if (ran) continue;
    ran = true;
    const Outputs ref = step(c, p, plan_pipeline(c, p, "none", nullptr, true));
    const Outputs o = step(c, p, r);
    ASSERT_EQ(o.values.size(), ref.values.size());
    for (size_t v = 0; v < o.values.size(); ++v) EXPECT_TRUE(bitwise_equal(o.values[v], ref.values[v])) << ratio << " output " << v;
  }
  EXPECT_GT(chains, 0) << "no member was made in the +chains order";
  EXPECT_GT(better, 0) << "no budget chose a +chains fill below every other member that fits";
}

// A fill whose first exact plan overshoots its level is repaired: keeps live at its exact peak are
// let go until they cover the overshoot (docs/MEMORY.md "The family"). On an LSTM the estimate
// misses (a kept value's readers are recomputed later than the start recomputed it), so fills are
// repaired at every budget of this sweep; each must still be within its level, the choice within
// the budget and the sweep monotone.
TEST(MirrorPlanner, BudgetFillsRepairedAtTheirPeakStayWithinTheirLevel) {
  const Config c = sweep_lstm(false, 10, 128);
  const Pipeline p = build_pipeline(c, static_data_shape(c), c.data.batch);
  MonotoneSweep sweep;
  int repairs = 0, fills = 0;
  for (const char* ratio : {"0.7x", "0.6x", "0.5x", "0.4x", "0.35x"}) {
    const MirrorResult r = plan_pipeline(c, p, std::string("budget=") + ratio, nullptr, true);
    sweep.check(r, ratio);
    for (const SearchStep& st : r.search) {
      if (!is_fill(st.origin)) continue;
      ++fills;
      EXPECT_LE(static_cast<double>(st.max_live_bytes), st.budget) << ratio << ": a fill above its level";
    }
    repairs += r.fill_repairs;
  }
  std::printf("%d fills, %d repaired\n", fills, repairs);
  EXPECT_GT(repairs, 0) << "no fill was repaired: the test shows nothing";
}

// The levels below one whose knapsack bound exceeds the recompute chosen so far are not filled:
// the choice is the one every level filled gives, with fewer members. (ResNet-56 b64: at the test
// models' sizes the bound is too weak to leave a level out.)
TEST(MirrorPlanner, BudgetLevelsLeftUnfilledDoNotChangeTheChoice) {
  const Config c = parse_config("model: {type: resnet, style: cifar, depth: 56, width: 16, layout: plain}\n"
                                "data: {source: synthetic, shape: [3, 32, 32], classes: 10, batch: 64}\n"
                                "train: {steps: 1}\n", "resnet56.yaml");
  const Pipeline p = build_pipeline(c, static_data_shape(c), c.data.batch);
  const SgdSpec sgd{c.optimizer.momentum, c.optimizer.weight_decay};
  const Graph& fwd = p.model.builder.graph();
  int skipped = 0;
  for (const char* budget : {"budget=0.6x", "budget=0.45x", "budget=0.4x", "budget=0.35x", "budget=0.3x", "budget=0.25x"}) {
    MemoryMode m = parse_memory_mode(budget);
    m.placement_seconds = 0;  // (best fit: the same arenas on both sides)
    MemoryMode every = m;
    every.budget_fill_every_level = true;
    const MirrorResult lazy = plan_mirror(fwd, p.model.loss, m, {}, &sgd);
    const MirrorResult all = plan_mirror(fwd, p.model.loss, every, {}, &sgd);
    EXPECT_EQ(all.fill_levels_skipped, 0);
    EXPECT_EQ(lazy.fill_levels + lazy.fill_levels_skipped, all.fill_levels) << budget;
    EXPECT_EQ(lazy.mirror, all.mirror) << budget;
    EXPECT_EQ(lazy.planned.report.recompute_cost, all.planned.report.recompute_cost) << budget;
    EXPECT_EQ(lazy.planned.report.total_bytes, all.planned.report.total_bytes) << budget;
    EXPECT_LE(lazy.search.size(), all.search.size()) << budget;
    std::printf("%s: %d of %d levels filled, %zu of %zu members\n", budget, lazy.fill_levels, all.fill_levels, lazy.search.size(),
                all.search.size());
    skipped += lazy.fill_levels_skipped;
  }
  EXPECT_GT(skipped, 0) << "no budget left a level unfilled: the test shows nothing";
}

}  // namespace
}  // namespace mnemo::test
