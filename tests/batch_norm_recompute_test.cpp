// A training batch_norm recomputed from its saved statistics (OpDef::recompute_as,
// batch_norm_recompute): the same outputs bitwise, the recomputed copies of mirror plans run it, and
// the planners' recompute costs (the knapsack bound, the programme) count it, so their bounds stay
// below every plan's real cost.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>

#include "autograd/gradient.h"
#include "core/graph.h"
#include "memory/budget_exact.h"
#include "memory/liveness.h"
#include "memory/mirror_planner.h"
#include "memory/planner.h"
#include "test_util.h"

namespace mnemo::test {
namespace {

bool same_bits(const Tensor& a, const Tensor& b) {
  return a.type() == b.type() && std::memcmp(a.data(), b.data(), a.bytes()) == 0;
}

// batch_norm's y, then batch_norm_recompute's from its mean and inv_std: equal bits, for
// float32 and float64, plain and channel-blocked x (the channel counts and pixels chosen so the
// blocked sums and the vectorised lanes have remainders).
TEST(BatchNormRecompute, GivesTheForwardsOutputsBitwise) {
  int checked = 0;
  for (const DType dt : {DType::f32, DType::f64})
    for (const int64_t block : {int64_t{0}, int64_t{8}, int64_t{16}}) {
      const int64_t C = block ? 2 * block : 5;
      const Shape xs = block ? Shape{3, C / block, 5, 7, block} : Shape{3, C, 5, 7};
      Tensor x(dt, xs), gamma(dt, {C}), beta(dt, {C});
      fill_normal(x, 11 + block, 3.0);
      for (int64_t i = 0; i < x.numel(); ++i) set(x, i, get(x, i) + 1.5);  // (a mean far from 0)
      fill_normal(gamma, 12, 1.0);
      fill_normal(beta, 13, 1.0);
      Attrs a;
      if (block) a["block"] = block;
      const std::vector<Tensor> fwd = run("batch_norm", {&x, &gamma, &beta}, a);
      const std::vector<Tensor> again = run("batch_norm_recompute", {&x, &gamma, &beta, &fwd[1], &fwd[2]}, a);
      ASSERT_EQ(again.size(), 1u);
      EXPECT_TRUE(same_bits(fwd[0], again[0])) << dtype_name(dt) << " block " << block;
      // (not vacuous: other statistics give another y)
      Tensor other = cast(fwd[1], dt);
      set(other, 0, get(other, 0) + 0.5);
      EXPECT_FALSE(same_bits(fwd[0], run("batch_norm_recompute", {&x, &gamma, &beta, &other, &fwd[2]}, a)[0]));
      ++checked;
    }
  EXPECT_EQ(checked, 6);
}

// A chain of two blocks (fully connected, batch norm, ReLU; the second with a skip added before
// its ReLU) and a classifier, float64 [64, 32].
Graph bn_chain(EntryRef* loss) {
  Graph g;
  EntryRef x = g.input("x", {DType::f64, {64, 32}});
  const EntryRef labels = g.input("labels", {DType::i32, {64}});
  for (int k = 0; k < 2; ++k) {
    const std::string s = std::to_string(k);
    const EntryRef in = x;
    x = g.add1("fully_connected", {x, g.param("w" + s, {DType::f64, {32, 32}})});
    x = g.add1("batch_norm", {x, g.param("gamma" + s, {DType::f64, {32}}), g.param("beta" + s, {DType::f64, {32}})});
    if (k == 1) x = g.add1("add", {x, in});
    x = g.add1("relu", {x});
  }
  *loss = g.add1("softmax_cross_entropy", {g.add1("fully_connected", {x, g.param("head", {DType::f64, {4, 32}})}), labels});
  return g;
}

// Every 0/1 plan of the chain: each recomputed batch norm is a batch_norm_recompute reading its
// forward node's saved statistics, and so does its backward (no copies of them are made); the
// programme admits the plan at its own arena at no more than its real recompute cost, and the
// knapsack bound is at most the least real cost of the plans whose live bytes when the forward
// pass ends fit each limit, at balances 0, 10 and 1000. Checked to fail: with the batch norm's
// full forward cost (7 FLOPs and four passes per element) in place of the recompute's (3 and two)
// in the programme (it then costs plans above their real recompute), and with the programme's
// "a result backward reads is kept or recomputed" applied to the saved statistics (a plan
// dropping a batch norm whose ReLU is kept recomputes nothing: backward reads the forward
// node's statistics). The knapsack bound's counterparts are not caught here (its bound stays
// below these plans' costs), so that check is only the relaxation's.
TEST(BatchNormRecompute, MirrorsRunItAndThePlannersCountItsCost) {
  EntryRef loss;
  const Graph g = bn_chain(&loss);
  const std::vector<int> compute = compute_nodes(g);
  ASSERT_EQ(compute.size(), 9u);
  const TrainingGraph keep_all = build_training_graph(g, loss, MirrorPlan(g.size(), 0));
  int recomputed_bn = 0, admitted = 0, bounds = 0, cheaper = 0, grads_read = 0;
  for (const double balance : {0.0, kDefaultBalance, 1000.0}) {
    std::vector<std::pair<int64_t, double>> all;  // (live bytes at the end of forward, real recompute cost) per plan
    for (uint32_t mask = 0; mask < (1u << compute.size()); ++mask) {
      const MirrorPlan m = mask_plan(g, compute, mask);
      const TrainingGraph tg = build_training_graph(g, loss, m);
      for (size_t id = static_cast<size_t>(tg.num_forward); id < tg.graph.size(); ++id) {
        const Node& n = tg.graph.node(static_cast<int>(id));
        if (n.role != NodeRole::recompute || g.node(n.source).op->name != "batch_norm") continue;
        ASSERT_EQ(n.op->name, "batch_norm_recompute") << n.name;
        ASSERT_EQ(n.inputs.size(), 5u);
        ASSERT_EQ(n.outputs.size(), 1u);
        EXPECT_EQ(n.inputs[3], (EntryRef{n.source, 1})) << n.name;
        EXPECT_EQ(n.inputs[4], (EntryRef{n.source, 2})) << n.name;
        for (size_t w = id + 1; w < tg.graph.size(); ++w) {  // its batch_norm_grad: this y, the forward's statistics
          const Node& b = tg.graph.node(static_cast<int>(w));
          if (b.op->name != "batch_norm_grad" || b.source != n.source) continue;
          EXPECT_EQ(b.inputs[2], (EntryRef{n.source, 1})) << b.name;
          EXPECT_EQ(b.inputs[3], (EntryRef{n.source, 2})) << b.name;
          ++grads_read;
        }
        if (balance == 0.0) ++recomputed_bn;
        // (the recompute is the cheaper one at every balance but FLOPs-only's 3 against 7)
        cheaper += recompute_cost(g, n.source).roofline(balance) < node_cost(g, n.source).roofline(balance);
      }
      const MemoryReport r = plan_training_step(tg, AllocMode::share, {.balance = balance}).report;
      // (the limit: its live bytes when the forward pass ends, what the knapsack bound's argument uses)
      const Liveness l = analyze_liveness(tg.graph, true, prepare_kernels(tg.graph));
      all.push_back({live_bytes_per_step(l, false, tg.num_forward).at(static_cast<size_t>(tg.num_forward - 1)), r.recompute_cost});
      if (mask % 5 == 0) {  // (the programme: a CBC solve per plan)
        double cost = NAN;
        EXPECT_EQ(budget_programme_rejects(g, keep_all, r.arena_bytes, m, &cost, balance), "") << "mask " << mask;
        EXPECT_LE(cost, r.recompute_cost * (1 + 1e-9) + 1e-6) << "mask " << mask << " balance " << balance;
        ++admitted;
      }
    }
    for (const auto& [limit, unused] : all) {
      double least = INFINITY;
      for (const auto& [a, c] : all)
        if (a <= limit) least = std::min(least, c);
      const double bound = budget_lower_bound(g, keep_all, limit, balance);
      ASSERT_FALSE(std::isnan(bound));
      EXPECT_LE(bound, least * (1 + 1e-12)) << "balance " << balance << " limit " << limit;
      bounds += bound > 0;
    }
  }
  EXPECT_GT(recomputed_bn, 0);
  EXPECT_GT(grads_read, 0);
  EXPECT_GT(cheaper, 0);
  EXPECT_GT(admitted, 100);
  EXPECT_GT(bounds, 0);  // (not vacuous: some bounds are above 0)
}

// recompute_outputs (core/graph.h): a recomputed copy's outputs are its op's unsaved ones, and an
// op that recomputes as another must list its saved outputs last (the copy's outputs are then its
// first ones, which its readers index): an op declaring an earlier output saved is refused. The
// ops are local (not registered: the registry-wide tests would run them).
TEST(BatchNormRecompute, SavedOutputsMustBeTheLast) {
  const TensorType a{DType::f32, {2, 3}}, s{DType::f32, {3}};
  OpDef last, first;
  last.name = "saved_last", last.saved_outputs = {1, 2};
  first.name = "saved_first", first.saved_outputs = {0, 2};
  Node n;
  n.op = &last, n.outputs = {a, s, s};
  const std::vector<TensorType> out = recompute_outputs(n);
  ASSERT_EQ(out.size(), 1u);
  EXPECT_EQ(out[0], a);
  n.op = &first;
  const std::string e = error_of([&] { recompute_outputs(n); });
  EXPECT_NE(e.find("saved_first"), std::string::npos) << e;
  EXPECT_NE(e.find("saved output 0 is not among its last"), std::string::npos) << e;
}

}  // namespace
}  // namespace mnemo::test
