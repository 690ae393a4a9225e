// Autograd on composite graphs: model-level float64 gradient checks (an MLP, a small conv net with
// a residual connection and batch norm, a 3-step unrolled LSTM with shared weights), and the
// property that every mirror plan gives bitwise the same loss, gradients and running statistics
// as plain backprop (m = 0), with recomputation scheduled right before its first consumer.
#include <random>
#include <set>

#include "autograd/gradient.h"
#include "autograd/update.h"
#include "models/small_nets.h"
#include "test_util.h"
#include "train/session/param_store.h"

namespace mnemo::test {
namespace {

enum class Net { mlp, cnn, lstm };
const char* net_name(Net n) { return n == Net::mlp ? "mlp" : n == Net::cnn ? "cnn" : "lstm"; }

Model make(Net net, DType dt) {
  switch (net) {
    case Net::mlp: return build_mlp(4, 5, 6, 3, dt);
    case Net::cnn: return build_small_cnn(3, 8, 3, 4, dt);
    case Net::lstm: return build_lstm(3, 2, 3, 4, 2, 5, dt);
  }
  return build_mlp(4, 5, 6, 3, dt);
}

struct Batch {
  Tensor data, labels;
};
Batch make_batch(const Model& m, uint64_t seed) {
  const Graph& g = m.builder.graph();
  Batch b{Tensor(g.node(g.find(m.data)).outputs[0]), Tensor(g.node(g.find(m.labels)).outputs[0])};
  fill_normal(b.data, seed);
  const int64_t classes = g.type(m.logits).shape[1];
  fill_ints(b.labels, seed + 1, classes);
  return b;
}

struct StepResult {
  Tensor loss;
  std::vector<Tensor> grads;
  std::vector<Tensor> state;  // running statistics after the step
};

StepResult run_step(const Model& m, const TrainingGraph& tg, const Batch& b, uint64_t seed) {
  const Graph& fwd = m.builder.graph();
  ParamStore params(fwd, m.builder.params(), seed);
  Executor ex(tg.graph, plan_separate(tg.graph));
  params.bind(ex);
  ex.bind(m.data, b.data.view());
  ex.bind(m.labels, b.labels.view());
  ex.run();
  StepResult r{clone(ex.entry(tg.loss)), {}, {}};
  for (const ParamGrad& pg : tg.grads) r.grads.push_back(clone(ex.entry(pg.grad)));
  for (const StateUpdate& u : fwd.state_updates) r.state.push_back(clone(params.at(fwd.node(u.param).name).view()));
  return r;
}

class Composite : public ::testing::TestWithParam<Net> {};

TEST_P(Composite, GradientsMatchCentralDifferencesInFloat64) {
  Model m = make(GetParam(), DType::f64);
  const Graph& fwd = m.builder.graph();
  TrainingGraph tg = build_training_graph(fwd, m.loss, {});
  Batch b = make_batch(m, 3);
  ParamStore params(fwd, m.builder.params(), 7);
  Executor ex(tg.graph, plan_separate(tg.graph));
  params.bind(ex);
  ex.bind(m.data, b.data.view());
  ex.bind(m.labels, b.labels.view());
  ex.run();
  std::vector<Tensor> analytic;
  for (const ParamGrad& pg : tg.grads) analytic.push_back(clone(ex.entry(pg.grad)));
  // The forward graph alone evaluates the loss (state updates write running statistics only,
  // which the training-mode loss does not read).
  Executor fx(fwd, plan_separate(fwd));
  params.bind(fx);
  fx.bind(m.data, b.data.view());
  fx.bind(m.labels, b.labels.view());
  auto loss = [&]() {
    fx.run();
    return fx.entry(m.loss).as<double>()[0];
  };
  const double h = 1e-6;
  int checked = 0;
  for (size_t k = 0; k < tg.grads.size(); ++k) {
    Tensor& w = params.at(fwd.node(tg.grads[k].param).name);
    const int64_t stride = std::max<int64_t>(1, w.numel() / 6);
    for (int64_t i = 0; i < w.numel(); i += stride) {
      const double w0 = get(w, i);
      set(w, i, w0 + h);
      const double lp = loss();
      set(w, i, w0 - h);
      const double lm = loss();
      set(w, i, w0);
      const double num = (lp - lm) / (2 * h), ana = get(analytic[k], i);
      EXPECT_LE(std::abs(ana - num), 1e-5 * std::max({std::abs(ana), std::abs(num), 1.0}))
          << net_name(GetParam()) << " " << fwd.node(tg.grads[k].param).name << "[" << i << "]: analytic " << ana
          << " numeric " << num;
      ++checked;
    }
  }
  EXPECT_GT(checked, 10);
}

// Recomputation runs right before the backward that first needs it (Alg. 2: the ancestors of
// each new gradient node are appended in topological order): between a recompute node and the
// first backward node depending on it, only recompute nodes and backward nodes of that same
// forward node run. And every recompute node is used.
void expect_recompute_placed_late(const Graph& g) {
  const int n = static_cast<int>(g.size());
  std::vector<std::vector<int>> consumers(n);
  for (int v = 0; v < n; ++v)
    for (const EntryRef& e : g.node(v).inputs) consumers[e.node].push_back(v);
  // first_backward[v]: the earliest backward node that depends on v through recompute nodes.
  std::vector<int> first_backward(n, n);
  for (int v = n - 1; v >= 0; --v)
    for (int w : consumers[v])
      first_backward[v] = std::min(first_backward[v], g.node(w).role == NodeRole::backward ? w : first_backward[w]);
  for (int r = 0; r < n; ++r) {
    if (g.node(r).role != NodeRole::recompute) continue;
    ASSERT_FALSE(consumers[r].empty()) << g.node(r).name << " is recomputed but never read";
    const int b = first_backward[r];
    ASSERT_LT(b, n) << g.node(r).name << " feeds no backward node";
    for (int v = r + 1; v < b; ++v) {
      const Node& x = g.node(v);
      EXPECT_TRUE(x.role == NodeRole::recompute || (x.role == NodeRole::backward && x.source == g.node(b).source))
          << "node " << x.name << " runs between recompute " << g.node(r).name << " and the backward node "
          << g.node(b).name << " that first needs it";
    }
  }
}

TEST_P(Composite, RandomMirrorPlansAreBitwiseIdenticalToPlainBackprop) {
  Model m = make(GetParam(), DType::f32);
  const Graph& fwd = m.builder.graph();
  Batch b = make_batch(m, 11);
  TrainingGraph base_tg = build_training_graph(fwd, m.loss, {});
  StepResult base = run_step(m, base_tg, b, 5);
  std::mt19937 rng(1234);
  int recomputed_total = 0;
  for (int trial = 0; trial < 12; ++trial) {
    MirrorPlan plan(fwd.size());
    const int max_m = trial < 4 ? 1 : trial < 8 ? 2 : 3;
    for (int& v : plan) v = std::uniform_int_distribution<int>(0, max_m)(rng) * (rng() % 3 != 0);
    if (trial == 0) std::fill(plan.begin(), plan.end(), 1);  // drop everything
    TrainingGraph tg = build_training_graph(fwd, m.loss, plan);
    int recomputed = 0;
    for (const Node& n : tg.graph.nodes()) recomputed += n.role == NodeRole::recompute;
    recomputed_total += recomputed;
    expect_recompute_placed_late(tg.graph);
    StepResult r = run_step(m, tg, b, 5);
    ASSERT_TRUE(bitwise_equal(r.loss, base.loss)) << "trial " << trial;
    ASSERT_EQ(r.grads.size(), base.grads.size());
    for (size_t k = 0; k < r.grads.size(); ++k)
      EXPECT_TRUE(bitwise_equal(r.grads[k], base.grads[k]))
          << "trial " << trial << ": gradient of " << fwd.node(tg.grads[k].param).name << " differs";
    for (size_t k = 0; k < r.state.size(); ++k) EXPECT_TRUE(bitwise_equal(r.state[k], base.state[k])) << "trial " << trial;
  }
  EXPECT_GT(recomputed_total, 0) << "the plans must actually recompute something";
}

INSTANTIATE_TEST_SUITE_P(Nets, Composite, ::testing::Values(Net::mlp, Net::cnn, Net::lstm),
                         [](const auto& info) { return std::string(net_name(info.param)); });

TEST(Autograd, PlainBackpropHasNoRecomputeAndKeepsForwardIds) {
  Model m = make(Net::cnn, DType::f32);
  TrainingGraph tg = build_training_graph(m.builder.graph(), m.loss, {});
  for (size_t v = 0; v < m.builder.graph().size(); ++v)
    EXPECT_EQ(tg.graph.node(static_cast<int>(v)).name, m.builder.graph().node(static_cast<int>(v)).name);
  for (const Node& n : tg.graph.nodes()) EXPECT_NE(n.role, NodeRole::recompute);
  // One gradient per trainable parameter, none for running statistics.
  size_t trainable = 0;
  for (const ParamSpec& s : m.builder.params()) trainable += s.trainable;
  EXPECT_EQ(tg.grads.size(), trainable);
}

// The optimiser's node names are kept exactly (checkpoints find the velocities by name): a backward
// node that happens to hold one (forward node "velocity", parameter "grad/fully_connected_grad_weight")
// is renamed, not the velocity.
TEST(Autograd, OptimiserNamesWinOverBackwardNodesOfTheSameName) {
  Graph g;
  const EntryRef x = g.input("x", {DType::f32, {2, 3}});
  const EntryRef labels = g.input("labels", {DType::i32, {2}});
  const EntryRef w = g.param("grad/fully_connected_grad_weight", {DType::f32, {4, 3}});
  const EntryRef h = g.add1("fully_connected", {x, w}, {}, "velocity");
  const EntryRef loss = g.add1("softmax_cross_entropy", {h, labels}, {}, "loss");
  TrainingGraph tg = build_training_graph(g, loss, {});
  const int dw = tg.graph.find("velocity/grad/fully_connected_grad_weight");
  ASSERT_GE(dw, tg.num_forward);  // the backward node holds the name before the updates
  add_sgd_updates(tg, {0.9, 0.0});
  ASSERT_EQ(tg.optimizer_state.size(), 1u);
  const int v = tg.graph.find("velocity/grad/fully_connected_grad_weight");
  EXPECT_EQ(v, tg.optimizer_state[0]);
  EXPECT_TRUE(tg.graph.node(v).is(OpKind::param));
  const int renamed = tg.graph.find("velocity/grad/fully_connected_grad_weight_1");
  ASSERT_GE(renamed, 0);
  EXPECT_EQ(tg.graph.node(renamed).op->name, "fully_connected_grad_weight");
  EXPECT_EQ(tg.grads[0].grad.node, renamed);
  EXPECT_GE(tg.graph.find("optimizer/lr"), 0);
  EXPECT_GE(tg.graph.find("optimizer/loss_check"), 0);
}

// The LSTM's weights are read at every step; their gradient is a chain of in-place-able adds:
// each partial sum has exactly one reader (the next add), so it never needs one buffer per use.
TEST(Autograd, SharedWeightGradientsAccumulateAsAChain) {
  Model m = build_lstm(5, 2, 3, 4, 1, 5);
  TrainingGraph tg = build_training_graph(m.builder.graph(), m.loss, {});
  const Graph& g = tg.graph;
  std::vector<int> readers(g.size(), 0);
  for (const Node& n : g.nodes())
    for (const EntryRef& e : n.inputs) ++readers[e.node];
  const int wx = g.find("lstm0/wx");
  ASSERT_GE(wx, 0);
  EntryRef grad;
  for (const ParamGrad& pg : tg.grads)
    if (pg.param == wx) grad = pg.grad;
  // fully_connected_grad_weight accumulates (OpDef::accumulates): each use's GEMM adds into the
  // running sum of the uses before it, its third input; no `add` node.
  int folded = 0;
  EntryRef e = grad;
  for (; g.node(e.node).op->name == "fully_connected_grad_weight" && g.node(e.node).inputs.size() == 3;
       e = g.node(e.node).inputs[2]) {
    ++folded;
    const EntryRef prev = g.node(e.node).inputs[2];
    EXPECT_EQ(readers[prev.node], 1) << g.node(prev.node).name << " (a partial sum) has other readers";
    EXPECT_LT(prev.node, e.node);
  }
  EXPECT_EQ(g.node(e.node).op->name, "fully_connected_grad_weight") << "the first use's gradient starts the sum";
  EXPECT_EQ(g.node(e.node).inputs.size(), 2u);
  EXPECT_EQ(folded, 4) << "5 uses of wx: 4 accumulating GEMMs";
  for (const Node& n : g.nodes())
    if (n.op->name == "add") { EXPECT_EQ(n.name.find("lstm0/wx"), std::string::npos) << n.name; }
}

TEST(Autograd, BatchNormRunningStatisticsUpdatedOnceUnderRecompute) {
  Model m = make(Net::cnn, DType::f32);
  const Graph& fwd = m.builder.graph();
  MirrorPlan all(fwd.size(), 1);
  TrainingGraph tg = build_training_graph(fwd, m.loss, all);
  int stats_nodes = 0;
  for (const Node& n : tg.graph.nodes()) stats_nodes += n.op->name == "batch_norm_stats";
  int bn = 0;
  for (const Node& n : fwd.nodes()) bn += n.op->name == "batch_norm";
  EXPECT_EQ(stats_nodes, bn) << "recomputation must never add a running-statistics update";
  Batch b = make_batch(m, 2);
  StepResult r = run_step(m, tg, b, 3);
  // One update from (mean 0, var 1): new_mean = 0.1 * batch_mean, checked against the forward mean.
  Executor ex(tg.graph, plan_separate(tg.graph));
  ParamStore params(fwd, m.builder.params(), 3);
  params.bind(ex);
  ex.bind(m.data, b.data.view());
  ex.bind(m.labels, b.labels.view());
  ex.run();
  const int bn1 = fwd.find("bn1");
  const float* mean = ex.entry({bn1, 1}).as<float>();
  const float* running = params.at("bn1/running_mean").as<float>();
  for (int c = 0; c < 3; ++c) EXPECT_NEAR(running[c], 0.1f * mean[c], 1e-6f);
}

TEST(Autograd, BadMirrorPlanAndBadLossAreClearErrors) {
  Model m = make(Net::mlp, DType::f32);
  EXPECT_THROW(build_training_graph(m.builder.graph(), m.loss, MirrorPlan(3, 0)), Error);
  EXPECT_THROW(build_training_graph(m.builder.graph(), m.logits, {}), Error);
}

}  // namespace
}  // namespace mnemo::test
