// The schedule order pass (memory/order.h): on small random nets, every topological order that
// keeps the dependencies is enumerated and its exact live-bytes peak computed; `optimal`'s
// programme must reach the least (without in-place, where its model is exact) and its bound
// must never exceed it; `greedy` is never above the default. (Bitwise-equal results of every
// order: tests/mirror_planner_test.cpp.)
#include <algorithm>
#include <chrono>
#include <cmath>
#include <functional>
#include <random>

#include <omp.h>
#include <sched.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include "autograd/update.h"
#include "memory/liveness.h"
#include "memory/milp.h"
#include "memory/order.h"
#include "test_util.h"

namespace mnemo::test {
namespace {

int64_t peak(TrainingGraph tg, std::vector<PreparedKernel> k, const std::vector<int>& order, bool inplace) {
  apply_order(tg, k, order);
  return max_live_bytes(analyze_liveness(tg.graph, inplace, k), true);
}

// Every order of the nodes after the forward pass that keeps `preds` (at most `cap`; false when
// there are more).
bool every_order(int F, const std::vector<std::vector<int>>& preds, size_t cap, std::vector<std::vector<int>>& out) {
  const int n = static_cast<int>(preds.size());
  std::vector<int> order(F), waiting(n, 0);
  for (int v = 0; v < F; ++v) order[v] = v;
  std::vector<std::vector<int>> succ(n);
  for (int v = F; v < n; ++v)
    for (int u : preds[v]) succ[u].push_back(v), ++waiting[v];
  std::vector<char> used(n, 0);
  std::function<bool()> rec = [&]() {
    if (static_cast<int>(order.size()) == n) {
      out.push_back(order);
      return out.size() <= cap;
    }
    for (int v = F; v < n; ++v) {
      if (used[v] || waiting[v]) continue;
      used[v] = 1, order.push_back(v);
      for (int s : succ[v]) --waiting[s];
      const bool ok = rec();
      for (int s : succ[v]) ++waiting[s];
      used[v] = 0, order.pop_back();
      if (!ok) return false;
    }
    return true;
  };
  return rec();
}

TEST(Order, OptimalMatchesEveryOrderOfSmallNets) {
  std::mt19937 rng(11);
  int nets = 0, improved = 0;
  for (int trial = 0; trial < 60 && nets < 12; ++trial) {
    EntryRef loss;
    const Graph g = random_net(rng, 3 + static_cast<int>(rng() % 4), &loss);
    const bool update = trial % 2;  // with the optimiser update (its in-place dependencies) or not
    TrainingGraph tg = build_training_graph(g, loss, MirrorPlan(g.size(), 0));
    if (update) add_sgd_updates(tg, {0.9, 0.0});
    const std::vector<PreparedKernel> kernels = prepare_kernels(tg.graph);
    std::vector<std::vector<int>> orders;
    if (!every_order(tg.num_forward, schedule_dependencies(tg), 20000, orders)) continue;
    ++nets;
    for (bool inplace : {false, true}) {
      int64_t least = INT64_MAX;
      for (const std::vector<int>& o : orders) least = std::min(least, peak(tg, kernels, o, inplace));
      std::vector<int> identity(tg.graph.size());
      for (size_t i = 0; i < identity.size(); ++i) identity[i] = static_cast<int>(i);
      const int64_t def = peak(tg, kernels, identity, inplace);
      for (ScheduleOrder which : {ScheduleOrder::greedy, ScheduleOrder::optimal}) {
        TrainingGraph t = tg;
        std::vector<PreparedKernel> k = kernels;
        const OrderReport r = reorder_step(t, k, which, inplace, 30);
        const std::string what = "trial " + std::to_string(trial) + " " + schedule_order_name(which) + (inplace ? " in-place" : "") +
                                 " (" + std::to_string(orders.size()) + " orders)";
        // The report is the exact peak of the graph it leaves, and never above the default.
        EXPECT_EQ(r.peak, max_live_bytes(analyze_liveness(t.graph, inplace, k), true)) << what;
        EXPECT_EQ(r.default_peak, def) << what;
        EXPECT_LE(r.peak, def) << what;
        EXPECT_GE(r.peak, least) << what;
        ASSERT_GE(r.bound, 0) << what;
        EXPECT_LE(r.bound, least) << what << ": the bound is above an order's peak";
        if (which == ScheduleOrder::optimal && !inplace) {
          EXPECT_EQ(r.peak, least) << what << ": " << r.status;
          EXPECT_EQ(r.bound, least) << what << ": " << r.status;
        }
        if (r.peak < def) ++improved;
      }
    }
  }
  EXPECT_GE(nets, 8);
  EXPECT_GT(improved, 0) << "no net where an order beat the default: the test shows nothing";
}

TEST(Order, NamesParse) {
  EXPECT_EQ(parse_schedule_order("greedy"), ScheduleOrder::greedy);
  EXPECT_EQ(parse_schedule_order("updates-last"), ScheduleOrder::updates_last);
  EXPECT_THROW(parse_schedule_order("fastest"), Error);
}

// run_milp with a start (the order programme's way): within the shortest limit CBC takes and a
// longer one, with and without its preprocessing, a solution satisfies every row and integrality,
// is no worse than the start, and the bound is not above it. A random covering programme (1500
// binary columns, 1500 rows of 5); the all-ones start is feasible. An infeasible programme is
// reported infeasible without a start, and never given a solution with an (infeasible) start.
TEST(Order, TheMilpWithAStartGivesFeasibleSolutionsAndValidBounds) {
  std::mt19937_64 rng(29);
  Lp lp;
  const int n = 1500;
  for (int j = 0; j < n; ++j) lp.add_col(0, 1, 1 + static_cast<double>(rng() % 97), true);
  for (int i = 0; i < n; ++i) {
    std::vector<std::pair<int, double>> terms;
    for (int k = 0; k < 5; ++k) terms.push_back({static_cast<int>(rng() % n), 1.0});
    std::sort(terms.begin(), terms.end());
    terms.erase(std::unique(terms.begin(), terms.end()), terms.end());
    lp.add_row(std::move(terms), 1, kInf);
  }
  const std::vector<double> start(n, 1.0);
  double start_cost = 0;
  for (int j = 0; j < n; ++j) start_cost += lp.obj[j];
  for (const bool preprocess : {true, false})
    for (const double seconds : {0.05, 1.0}) {
      const Solved s = run_milp(lp, seconds, kInf, 1e-4, &start, preprocess);
      const std::string what = std::string(preprocess ? "with" : "without") + " preprocessing, " + std::to_string(seconds) + " s";
      EXPECT_FALSE(s.infeasible || s.claimed_infeasible) << what;
      ASSERT_TRUE(s.solution) << what;
      ASSERT_EQ(s.x.size(), static_cast<size_t>(n));
      double cost = 0;
      for (int j = 0; j < n; ++j) {
        EXPECT_NEAR(s.x[j], std::round(s.x[j]), 1e-6) << what << ", column " << j;
        cost += lp.obj[j] * s.x[j];
      }
      for (const Lp::Row& r : lp.rows) {
        double sum = 0;
        for (const auto& [c, v] : r.terms) sum += v * s.x[c];
        ASSERT_GE(sum, r.lo - 1e-6) << what;
      }
      EXPECT_NEAR(s.objective, cost, 1e-6 * start_cost) << what;
      EXPECT_LE(cost, start_cost + 1e-6) << what;
      EXPECT_LE(s.bound, cost + 1e-6 * start_cost) << what;
    }
  Lp bad;
  const int x = bad.add_col(0, 1, 1, true);
  bad.add_row({{x, 1.0}}, 2, kInf);
  EXPECT_TRUE(run_milp(bad, 1.0, kInf, 1e-4).infeasible);
  const std::vector<double> bad_start = {1.0};
  for (const bool preprocess : {true, false}) {
    const Solved s = run_milp(bad, 1.0, kInf, 1e-4, &bad_start, preprocess);
    EXPECT_FALSE(s.solution) << "an infeasible programme with a start";
    EXPECT_TRUE(s.infeasible || s.claimed_infeasible);
    if (s.claimed_infeasible) { EXPECT_EQ(s.bound, -kInf) << "a claim not believed proves nothing"; }
  }
}

// run_milp's time limit is wall-clock seconds, as `exact=SECONDS` and `fast=SECONDS` promise. CBC
// counts CPU time by default: beside another busy process on the same core it got half the CPU
// and ran twice as long (2026-11-29: `budget=...:exact=1500` on ResNet-56 took 2029 s beside a
// build). Here a spinning child shares this thread's core while CBC works on a programme it does
// not finish in the limit (a random multi-dimensional knapsack, 400 binary columns, 40 rows).
TEST(Order, TheMilpTimeLimitIsWallClock) {
  cpu_set_t before;
  ASSERT_EQ(sched_getaffinity(0, sizeof before, &before), 0);
  int cpu = 0;
  while (cpu < CPU_SETSIZE && !CPU_ISSET(cpu, &before)) ++cpu;
  ASSERT_LT(cpu, CPU_SETSIZE);
  cpu_set_t one;
  CPU_ZERO(&one);
  CPU_SET(cpu, &one);
  // One OpenMP thread meanwhile: CBC's dense factorisations call LAPACK, here MKL's threaded
  // one, whose second thread would share the pinned core too and slow CBC's every step 6x.
  const int threads = omp_get_max_threads();
  omp_set_num_threads(1);
  ASSERT_EQ(sched_setaffinity(0, sizeof one, &one), 0);
  const pid_t child = fork();
  ASSERT_GE(child, 0);
  if (child == 0)
    for (;;) asm volatile("" ::: "memory");  // spin until killed
  std::mt19937_64 rng(41);
  Lp lp;
  const int n = 400;
  for (int j = 0; j < n; ++j) lp.add_col(0, 1, -static_cast<double>(50 + rng() % 950), true);
  for (int i = 0; i < 40; ++i) {
    std::vector<std::pair<int, double>> terms;
    double sum = 0;
    for (int j = 0; j < n; ++j) {
      const double w = static_cast<double>(1 + rng() % 1000);
      terms.push_back({j, w}), sum += w;
    }
    lp.add_row(std::move(terms), -kInf, sum / 4);
  }
  const double limit = 1.0;
  const auto t0 = std::chrono::steady_clock::now();
  const Solved s = run_milp(lp, limit, kInf, 0);
  const double took = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  kill(child, SIGKILL);
  waitpid(child, nullptr, 0);
  sched_setaffinity(0, sizeof before, &before);
  omp_set_num_threads(threads);
  ASSERT_TRUE(s.time_limit) << "the programme was solved in " << took << " s: the test shows nothing";
  EXPECT_LT(took, 1.6 * limit) << "a " << limit << " s limit took " << took << " s of wall-clock time";
}

// A pure LP (no integer column: budget's fast bound) comes back with its optimum's solution and
// that optimum as the bound. CBC keeps no "best solution" for an LP: before this was read from its
// column solution, the fast budget solver's LP bound was silently 0 and only the knapsack bound was
// reported. min x + 2y + 3z subject to x + y >= 1.5, y + z >= 1, x <= 1, y, z in [0, 1]: the
// optimum is x = 0.5, y = 1, z = 0 (cost 2.5; every vertex checked by hand: (1, 0.5, 0.5) costs
// 3.5, (0.5, 1, 0) 2.5, (1, 1, 0) 3).
TEST(Order, AnLpReturnsItsOptimumAndItsBound) {
  Lp lp;
  const int x = lp.add_col(0, 1, 1, false), y = lp.add_col(0, 1, 2, false), z = lp.add_col(0, 1, 3, false);
  lp.add_row({{x, 1.0}, {y, 1.0}}, 1.5, kInf);
  lp.add_row({{y, 1.0}, {z, 1.0}}, 1, kInf);
  const Solved s = run_milp(lp, 5.0, kInf, 1e-4);
  ASSERT_TRUE(s.optimal);
  ASSERT_TRUE(s.solution) << "an LP's optimum has a solution";
  ASSERT_EQ(s.x.size(), 3u);
  EXPECT_NEAR(s.x[x], 0.5, 1e-9);
  EXPECT_NEAR(s.x[y], 1.0, 1e-9);
  EXPECT_NEAR(s.x[z], 0.0, 1e-9);
  EXPECT_NEAR(s.objective, 2.5, 1e-9);
  EXPECT_NEAR(s.bound, 2.5, 1e-9) << "an LP's optimum is its bound";
}

}  // namespace
}  // namespace mnemo::test
