// Mirror planners: every memory mode gives losses, gradients and running statistics bitwise
// identical to `none` (ResNet with BN, plain and channel-blocked, the LSTM (fine-grained and fused cells), a generic DAG, MobileNet-v2, DenseNet-121,
// Inception-v3 and a DARTS network at small inputs); the planners' structure (cuts at
// residual block outputs and LSTM step boundaries, drop-bn-relu keeps conv outputs, the Appendix
// A search log); per-node overrides; and the memory ordering share > sublinear > recursive.
#include <cstring>
#include <map>
#include <random>
#include <set>
#include <tuple>

#include "autograd/allreduce.h"
#include "core/comm.h"
#include "memory/liveness.h"
#include "memory/mirror_planner.h"
#include "ops/conv2d.h"
#include "test_util.h"
#include "train/session/param_store.h"
#include "train/session/pipeline.h"
#include "train/session/sgd.h"

namespace mnemo::test {
namespace {

Config small_resnet() {
  return parse_config("model: {type: resnet, style: cifar, depth: 14, width: 4}\n"
                      "data: {source: synthetic, shape: [3, 8, 8], classes: 3, batch: 4}\n"
                      "train: {steps: 1}\n", "resnet14.yaml");
}
Config small_lstm() {
  return parse_config("model: {type: lstm, layers: 2, hidden: 8, per_step: true}\n"
                      "data: {source: synthetic-seq, shape: [12, 5], classes: 6, batch: 3}\n"
                      "train: {steps: 1}\n", "lstm.yaml");
}
Config small_lstm_fused() {
  return parse_config("model: {type: lstm, layers: 2, hidden: 8, per_step: true, cell: fused}\n"
                      "data: {source: synthetic-seq, shape: [12, 5], classes: 6, batch: 3}\n"
                      "train: {steps: 1}\n", "lstm-fused.yaml");
}
Config graph_config() { return load_config(MNEMO_SOURCE_DIR "/configs/mlp-graph.yaml"); }
// Zoo models at small inputs: depthwise convolutions, relu6 and inverted residuals; dense
// concatenations; Inception's branches and factorised kernels.
Config zoo(const std::string& model, const std::string& shape, int batch) {
  return parse_config("model: " + model + "\ndata: {source: synthetic, shape: " + shape + ", classes: 4, batch: " +
                          std::to_string(batch) + "}\ntrain: {steps: 1}\n",
                      "zoo.yaml");
}
const std::vector<std::string> kModels = {"resnet", "lstm", "graph", "mobilenet_v2", "densenet121", "inception_v3", "darts",
                                          "amoebanet", "lstm_fused", "resnet_blocked"};
Config model_config(int i) {
  switch (i) {
    case 0: return small_resnet();
    case 1: return small_lstm();
    case 2: return graph_config();
    case 3: return zoo("{type: mobilenet_v2, width_mult: 0.25}", "[3, 32, 32]", 2);
    case 4: return zoo("{type: densenet, depth: 121}", "[3, 32, 32]", 2);
    case 5: return zoo("{type: inception_v3}", "[3, 75, 75]", 2);
    case 6: return zoo("{type: darts, init_channels: 4, layers: 5}", "[3, 16, 16]", 2);
    case 8: return small_lstm_fused();
    case 9:  // channel-blocked activations (model.layout: blocked; oneDNN's block on this CPU)
      return parse_config("model: {type: resnet, style: cifar, depth: 14, width: 16, layout: blocked}\n"
                          "data: {source: synthetic, shape: [3, 8, 8], classes: 3, batch: 4}\n"
                          "train: {steps: 1}\n", "resnet14-blocked.yaml");
    default: {  // AmoebaNet's cells (sep_conv_7x7, conv_7x1_1x7 with its 1x2 and 2x1 strides), shrunk
      Config c = load_config(MNEMO_SOURCE_DIR "/configs/table2/amoebanet.yaml");
      c.zoo.init_channels = 4, c.zoo.layers = 5, c.data.shape = {3, 16, 16}, c.data.batch = 2;
      return c;
    }
  }
}

struct Outputs {
  // loss, every gradient (no update) or every parameter and velocity after the update, then the
  // running statistics after the step
  std::vector<Tensor> values;
};

Outputs step(const Config& c, const Pipeline& p, const MirrorResult& mr) {
  const Graph& fwd = p.model.builder.graph();
  ParamStore params(fwd, p.model.builder.params(), 5);
  Sgd sgd(params, {0.1, 0.9, 1e-3});
  for (Tensor& v : sgd.state()) fill_normal(v, 21, 0.01);  // a velocity from earlier steps
  Executor ex(mr.training.graph, mr.planned.plan);
  EXPECT_EQ(ex.allocated_bytes(), mr.planned.report.arena_bytes);
  validate_plan(mr.training.graph, mr.planned.plan);
  params.bind(ex);
  Tensor lr(DType::f32, {1});
  lr.as<float>()[0] = 0.05f;
  const bool update = mr.training.lr >= 0;
  if (update) {
    size_t k = 0;
    for (const ParamSpec& s : params.specs())
      if (s.trainable) ex.bind("velocity/" + s.name, sgd.state().at(k++).view());
    ex.bind(mr.training.lr, lr.view());
  }
  Tensor x(fwd.node(fwd.find(p.model.data)).outputs[0]), y(fwd.node(fwd.find(p.model.labels)).outputs[0]);
  fill_normal(x, 17);
  fill_ints(y, 18, p.data.classes);
  ex.bind(p.model.data, x.view());
  ex.bind(p.model.labels, y.view());
  Tensor step(DType::i32, {1});
  step.as<int32_t>()[0] = 3;
  if (mr.training.graph.find(kRngStep) >= 0) ex.bind(kRngStep, step.view());  // models with dropout
  ex.run();
  Outputs o;
  o.values.push_back(clone(ex.entry(mr.training.loss)));
  if (update) {
    EXPECT_EQ(ex.fetch(mr.training.status).as<int32_t>()[0], 0);
    for (const ParamSpec& s : params.specs()) o.values.push_back(clone(params.at(s.name)));
    for (const Tensor& v : sgd.state()) o.values.push_back(clone(v));
  } else {
    for (const ParamGrad& g : mr.training.grads) o.values.push_back(clone(ex.entry(g.grad)));
  }
  for (const StateUpdate& u : fwd.state_updates) o.values.push_back(clone(params.at(fwd.node(u.param).name)));
  return o;
}

class EveryMode : public ::testing::TestWithParam<int> {};

// The channel-blocked ResNet needs oneDNN's blocked layout on this CPU.
bool unavailable(int model) { return kModels[model] == "resnet_blocked" && ops::conv::onednn_channel_block() == 0; }

TEST_P(EveryMode, BitwiseIdenticalToNone) {
  if (unavailable(GetParam())) GTEST_SKIP() << "oneDNN uses no channel-blocked layout on this CPU";
  const Config c = model_config(GetParam());
  const Pipeline p = build_pipeline(c, static_data_shape(c), c.data.batch);
  std::vector<std::string> modes = all_memory_modes();
  modes.push_back("recursive=1");
  modes.push_back("recursive=3");
  for (bool update : {false, true}) {  // gradients as outputs; the SGD update inside the step
    const Outputs ref = step(c, p, plan_pipeline(c, p, "none", nullptr, update));
    for (const std::string& m : modes) {
      const MirrorResult mr = plan_pipeline(c, p, m, nullptr, update);
      const Outputs o = step(c, p, mr);
      ASSERT_EQ(o.values.size(), ref.values.size());
      for (size_t k = 0; k < o.values.size(); ++k)
        EXPECT_TRUE(bitwise_equal(o.values[k], ref.values[k])) << kModels[GetParam()] << " mode " << m << " update " << update << " output " << k;
      if (m == "sublinear" || m.rfind("recursive", 0) == 0) {
        EXPECT_GT(mr.planned.report.recompute_nodes, 0) << c.file << " " << m;
      }
    }
  }
}

// Every schedule order (memory/order.h) computes bitwise what the default order does, under the
// modes that drop nothing and that recompute, with the update inside the step; its report is the
// plan's exact live-bytes peak, never above the default order's, and its bound never above it.
TEST_P(EveryMode, EveryOrderBitwiseIdentical) {
  if (unavailable(GetParam())) GTEST_SKIP() << "oneDNN uses no channel-blocked layout on this CPU";
  Config c = model_config(GetParam());
  const Pipeline p = build_pipeline(c, static_data_shape(c), c.data.batch);
  for (const std::string& m : {"share", "sublinear", "optimal"}) {
    const Outputs ref = step(c, p, plan_pipeline(c, p, m, nullptr, true));
    for (const std::string order : {"greedy", "optimal", "updates-last"}) {
      // (optimal's programme runs to its 10 s limit on the generic DAG, DenseNet and Inception:
      // checked on the others)
      const std::string name = kModels[GetParam()];
      if (order == "optimal" && (name == "graph" || name == "densenet121" || name == "inception_v3")) continue;
      c.order = order;
      const MirrorResult mr = plan_pipeline(c, p, m, nullptr, true);
      c.order = "default";
      const Outputs o = step(c, p, mr);
      ASSERT_EQ(o.values.size(), ref.values.size());
      for (size_t k = 0; k < o.values.size(); ++k)
        EXPECT_TRUE(bitwise_equal(o.values[k], ref.values[k])) << kModels[GetParam()] << " mode " << m << " order " << order << " output " << k;
      EXPECT_EQ(mr.order.peak, mr.planned.report.max_live_bytes) << kModels[GetParam()] << " " << m << " " << order;
      if (order != "updates-last") {
        EXPECT_LE(mr.order.peak, mr.order.default_peak) << kModels[GetParam()] << " " << m << " " << order;
        EXPECT_LE(mr.order.bound, mr.order.peak) << kModels[GetParam()] << " " << m << " " << order;
      }
    }
  }
}

// Where OLLA's programme is too large (ResNet-56's sublinear step), `order: optimal` says so and
// reports the forward pass's peak as its bound; `budget` under another order reports only the
// knapsack bound (its programme models the default order) and still fits.
TEST(MirrorPlanner, OrdersReportTheirBoundAndComposeWithBudget) {
  Config c = load_config(MNEMO_SOURCE_DIR "/configs/resnet56-cifar.yaml");
  c.data.batch = 4;
  const Pipeline p = build_pipeline(c, static_data_shape(c), c.data.batch);
  c.order = "optimal";
  const MirrorResult mr = plan_pipeline(c, p, "sublinear", nullptr, true);
  EXPECT_NE(mr.order.status.find("too large"), std::string::npos) << mr.order.status;
  TrainingGraph tg = build_training_graph(p.model.builder.graph(), p.model.loss, mr.mirror);
  add_sgd_updates(tg, {c.optimizer.momentum, c.optimizer.weight_decay});
  const Liveness l = analyze_liveness(tg.graph, true, prepare_kernels(tg.graph));
  EXPECT_EQ(mr.order.bound, max_live_bytes(l, true, tg.num_forward));
  EXPECT_EQ(mr.order.default_peak, max_live_bytes(l, true));
  EXPECT_LE(mr.order.bound, mr.order.peak);
  c.order = "greedy";
  const MirrorResult b = plan_pipeline(c, p, "budget=0.5x", nullptr, true);
  EXPECT_NE(b.solver_status.find("knapsack bound"), std::string::npos) << b.solver_status;
  EXPECT_FALSE(b.bound_over_01);
  EXPECT_LE(b.planned.report.total_bytes, b.budget_bytes);
  EXPECT_LE(b.lower_bound_cost, b.planned.report.recompute_cost);
}

// The fast solver's proven bound is the programme's LP relaxation, above the covering-knapsack
// bound on ResNet-56 at sublinear's total (+9% at batch 64: 6.12 against 5.62 GFLOP). Until run_milp
// read an LP's solution, the LP's bound was silently 0 and only the knapsack bound was reported;
// this fails then.
TEST(MirrorPlanner, BudgetFastBoundIsTheProgrammesLp) {
  Config c = load_config(MNEMO_SOURCE_DIR "/configs/resnet56-cifar.yaml");
  c.data.batch = 8;
  c.resnet.layout = "plain";
  const Pipeline p = build_pipeline(c, static_data_shape(c), c.data.batch);
  const int64_t sub = plan_pipeline(c, p, "sublinear", nullptr, true).planned.report.total_bytes;
  const MirrorResult b = plan_pipeline(c, p, "budget=" + std::to_string(sub), nullptr, true);
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

// The cost model's balance (`:balance=B`) is budget's objective. On ResNet-56 b8 the plans chosen
// with B = 0 (FLOPs alone) and B = 10 (the default) differ at some of these budgets; at each, the
// B = 10 plan re-costed at B = 10 costs no more than the B = 0 plan does there, and the B = 0 plan
// recomputes no more FLOPs than the B = 10 one. A report's cost is its nodes' rooflines.
TEST(MirrorPlanner, BudgetMinimisesTheCostOfItsBalance) {
  Config c = load_config(MNEMO_SOURCE_DIR "/configs/resnet56-cifar.yaml");
  c.data.batch = 8;
  c.resnet.layout = "plain";
  const Pipeline p = build_pipeline(c, static_data_shape(c), c.data.batch);
  const Graph& fwd = p.model.builder.graph();
  auto cost_at = [&](const MirrorPlan& m, double balance) {
    return plan_training_step(build_training_graph(fwd, p.model.loss, m), AllocMode::share, nullptr, -1, {}, -1, balance).report;
  };
  int differ = 0;
  for (const std::string r : {"0.3x", "0.55x", "0.7x"}) {
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
    EXPECT_LE(t.planned.report.recompute_cost, f10.recompute_cost * (1 + 1e-12)) << r;
    EXPECT_LE(f.planned.report.recompute_flops, t.planned.report.recompute_flops * (1 + 1e-12)) << r;
    differ += f.mirror != t.mirror;
  }
  EXPECT_GT(differ, 0);
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

INSTANTIATE_TEST_SUITE_P(Models, EveryMode, ::testing::Range(0, static_cast<int>(kModels.size())),
                         [](const auto& info) { return kModels[info.param]; });

// The channel-blocked ResNet is the plain one with its activations stored differently: the same
// parameters (names and shapes), and a step's loss and gradients, or loss, updated parameters,
// velocities and running statistics, equal within float32 rounding (batch norm sums in another
// order; the convolutions are bitwise the plain ones, tests/ops/layout_test.cpp). CIFAR style and
// ImageNet style (7x7 stem, max pool, then blocked; bottleneck blocks).
TEST(BlockedLayout, ResNetStepMatchesThePlainOne) {
  if (ops::conv::onednn_channel_block() == 0) GTEST_SKIP() << "oneDNN uses no channel-blocked layout on this CPU";
  const Config imagenet = parse_config(
      "model: {type: resnet, style: imagenet, blocks: [1, 1, 1, 1], width: 16, layout: blocked}\n"
      "data: {source: synthetic, shape: [3, 32, 32], classes: 3, batch: 2}\ntrain: {steps: 1}\nplacement_seconds: 0\n",
      "resnet-imagenet-blocked.yaml");
  for (const Config& base : {model_config(9), imagenet}) {
    Config cb = base, cp = base;
    cp.resnet.layout = "plain";
    const Pipeline pb = build_pipeline(cb, static_data_shape(cb), cb.data.batch);
    const Pipeline pp = build_pipeline(cp, static_data_shape(cp), cp.data.batch);
    ASSERT_FALSE(pb.model.layout.empty()) << base.file;
    ASSERT_TRUE(pp.model.layout.empty()) << base.file;
    const auto &sb = pb.model.builder.params(), &sp = pp.model.builder.params();
    ASSERT_EQ(sp.size(), sb.size());
    for (size_t i = 0; i < sp.size(); ++i) {
      EXPECT_EQ(sp[i].name, sb[i].name);
      EXPECT_EQ(pp.model.builder.graph().node(sp[i].node).outputs[0], pb.model.builder.graph().node(sb[i].node).outputs[0]) << sp[i].name;
    }
    for (const bool update : {false, true}) {
      const Outputs ob = step(cb, pb, plan_pipeline(cb, pb, "share", nullptr, update));
      const Outputs op = step(cp, pp, plan_pipeline(cp, pp, "share", nullptr, update));
      ASSERT_EQ(ob.values.size(), op.values.size());
      for (size_t k = 0; k < ob.values.size(); ++k) {
        ASSERT_EQ(ob.values[k].shape(), op.values[k].shape()) << "output " << k;
        const double d = norm_rel_diff(ob.values[k], op.values[k]);
        EXPECT_TRUE(d <= 2e-5) << base.file << " update " << update << " output " << k << ": relative difference " << d;  // (NaN fails)
      }
    }
  }
}

// Stands in for the other ranks of a data-parallel run (docs/PARALLEL.md): this process is rank 0
// of `size`, and every other rank's row of a gathered bucket is a copy of this one's, as if every
// rank had computed the same gradients. Their mean is then the gradient itself, exactly for
// power-of-two sizes (g + g + ... = 2^k g and the division are exact), so a step with the
// all-reduce must give bitwise the single-process step. Checks that each wait follows its start.
class MirrorComm : public Communicator {
 public:
  explicit MirrorComm(int size) : size_(size) {}
  int rank() const override { return 0; }
  int size() const override { return size_; }
  void start_gather(void* buf, int64_t bytes) override {
    EXPECT_FALSE(running_.count(buf)) << "a second gather on one buffer";
    char* b = static_cast<char*>(buf);
    for (int r = 1; r < size_; ++r) std::memcpy(b + r * bytes, b, static_cast<size_t>(bytes));
    running_.insert(buf);
    ++gathers;
  }
  void wait_gather(void* buf, const std::string&) override {
    EXPECT_EQ(running_.erase(buf), 1u) << "a wait without its start";
    ++waits;
  }
  int gathers = 0, waits = 0;

 private:
  int size_;
  std::set<void*> running_;
};

// The all-reduce pass (autograd/allreduce.h) in every planner's step: with the other ranks
// computing the same gradients, losses, parameters and velocities after the update are bitwise
// those of one process, in every mode and in reordered schedules; the buckets hold every
// gradient once, each update reads a reduced gradient, and every gather is waited for.
TEST(DataParallel, StepWithAllReduceIsTheSingleProcessStep) {
  for (int model : {0, 1, 2, 8}) {  // ResNet (BN), LSTM, generic graph, fused LSTM
    Config c = model_config(model);
    c.parallel.bucket_bytes = 3000;  // several buckets on these small nets
    const Pipeline p = build_pipeline(c, static_data_shape(c), c.data.batch);
    const Outputs ref = step(c, p, plan_pipeline(c, p, "none", nullptr, true));
    for (int ranks : {2, 4}) {
      const Pipeline pr = build_pipeline(c, static_data_shape(c), c.data.batch, ranks);
      MirrorComm comm(ranks);
      set_communicator(&comm);
      for (const std::string m : {"none", "share", "drop-bn-relu", "sublinear", "optimal", "budget", "share/greedy",
                                  "sublinear/updates-last"}) {
        SCOPED_TRACE(kModels[model] + " ranks " + std::to_string(ranks) + " mode " + m);
        Config co = c;  // "mode/order": a schedule order other than the default moves the all-reduce nodes too
        const size_t slash = m.find('/');
        if (slash != std::string::npos) co.order = m.substr(slash + 1);
        std::string mode = m.substr(0, slash);
        if (mode == "budget")  // at sublinear's total: feasible on every net
          mode += "=" + std::to_string(plan_pipeline(co, pr, "sublinear", nullptr, true).planned.report.total_bytes);
        const MirrorResult mr = plan_pipeline(co, pr, mode, nullptr, true);
        const Graph& g = mr.training.graph;
        int starts = 0, waits = 0;
        std::set<std::pair<int, int>> reduced;  // the wait nodes' outputs
        for (int v = 0; v < static_cast<int>(g.size()); ++v) {
          const Node& n = g.node(v);
          if (n.op->name == "grad_allreduce_start") {
            ++starts;
            EXPECT_EQ(std::get<int64_t>(n.attrs.at("ranks")), int64_t{ranks});
          }
          if (n.op->name == "grad_allreduce_wait") {
            ++waits;
            EXPECT_EQ(g.node(n.inputs[0].node).op->name, "grad_allreduce_start");
            for (size_t j = 0; j < n.outputs.size(); ++j) reduced.insert({v, static_cast<int>(j)});
          }
        }
        EXPECT_GT(starts, 1) << "bucket_bytes 3000 should give several buckets";
        EXPECT_EQ(starts, waits);
        // Each gradient is one output of one wait, and no wait output is left over.
        std::set<std::pair<int, int>> grads;
        for (const ParamGrad& pg : mr.training.grads) {
          EXPECT_TRUE(reduced.count({pg.grad.node, pg.grad.index})) << g.node(pg.param).name << "'s gradient is not all-reduced";
          grads.insert({pg.grad.node, pg.grad.index});
        }
        EXPECT_EQ(grads, reduced);
        int updates = 0;
        for (int v = 0; v < static_cast<int>(g.size()); ++v) {
          const Node& n = g.node(v);
          if (n.op->name != "sgd_update") continue;
          ++updates;
          EXPECT_TRUE(reduced.count({n.inputs[1].node, n.inputs[1].index})) << n.name << " reads a gradient that was not all-reduced";
        }
        EXPECT_EQ(updates, static_cast<int>(mr.training.grads.size()));
        const int before = comm.gathers;
        const Outputs o = step(c, pr, mr);
        EXPECT_EQ(comm.gathers - before, starts);
        EXPECT_EQ(comm.gathers, comm.waits);
        ASSERT_EQ(o.values.size(), ref.values.size());
        for (size_t k = 0; k < o.values.size(); ++k) EXPECT_TRUE(bitwise_equal(o.values[k], ref.values[k])) << "output " << k;
      }
      set_communicator(nullptr);
    }
  }
}

// The automatic bucket size: a quarter of the gradient bytes within [1 MiB, 25 MiB]; a configured
// size wins; the report line names what the pass did.
TEST(DataParallel, BucketSizes) {
  constexpr int64_t MiB = int64_t{1} << 20;
  EXPECT_EQ(bucket_bytes_for(3423080, 0), MiB);             // ResNet-56: 4 buckets
  EXPECT_EQ(bucket_bytes_for(40 * MiB, 0), 10 * MiB);
  EXPECT_EQ(bucket_bytes_for(230 * MiB, 0), 25 * MiB);       // ResNet-152
  EXPECT_EQ(bucket_bytes_for(230 * MiB, 4096), 4096);
  Config c = small_lstm();
  const Pipeline pr = build_pipeline(c, static_data_shape(c), c.data.batch, 2);
  const MirrorResult mr = plan_pipeline(c, pr, "share", nullptr, true);
  const std::string d = describe_buckets(mr.training, 0);
  EXPECT_EQ(d.rfind("1 bucket(s) of at most 1048576 bytes (", 0), 0u) << d;  // a small net: one bucket
  EXPECT_NE(d.find("parallel.bucket_bytes: auto"), std::string::npos) << d;
  // The ranks' plans are compared by their gathers: equal plans agree, other buckets do not
  // (on this LSTM `share` and `sublinear` complete the gradients in the same order).
  c.parallel.bucket_bytes = 3000;
  const int64_t f = gather_fingerprint(plan_pipeline(c, pr, "share", nullptr, true).training);
  EXPECT_EQ(gather_fingerprint(plan_pipeline(c, pr, "share", nullptr, true).training), f);
  EXPECT_EQ(gather_fingerprint(plan_pipeline(c, pr, "sublinear", nullptr, true).training), f);
  c.parallel.bucket_bytes = 6000;
  EXPECT_NE(gather_fingerprint(plan_pipeline(c, pr, "share", nullptr, true).training), f);
  EXPECT_NE(gather_fingerprint(mr.training), f);
}

// A step planned for several ranks refuses to run without a communicator of that size.
TEST(DataParallel, StepWithoutItsRanksIsAClearError) {
  Config c = small_lstm();
  const Pipeline pr = build_pipeline(c, static_data_shape(c), c.data.batch, 2);
  const MirrorResult mr = plan_pipeline(c, pr, "share", nullptr, true);
  set_communicator(nullptr);
  try {
    step(c, pr, mr);
    ADD_FAILURE() << "no error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("planned for 2 ranks"), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find("mpirun"), std::string::npos) << e.what();
  }
  MirrorComm three(3);
  set_communicator(&three);
  EXPECT_THROW(step(c, pr, mr), Error);
  set_communicator(nullptr);
}

TEST(MirrorPlanner, CutsAreResidualBlockOutputsAndLstmStepBoundaries) {
  const Config r = small_resnet();
  const Pipeline rp = build_pipeline(r, static_data_shape(r), 4);
  const Graph& rg = rp.model.builder.graph();
  int block_outputs = 0;
  for (const Cut& cut : find_cuts(rg)) {
    ASSERT_FALSE(cut.keep.empty());
    for (int u : cut.keep) block_outputs += rg.node(u).name.find("/out") != std::string::npos;
  }
  // Depth 14 has 6 residual blocks; the last one's output is not a local minimum (the global
  // average pool after it is smaller).
  EXPECT_GE(block_outputs, 5);
  const Config l = small_lstm();
  const Pipeline lp = build_pipeline(l, static_data_shape(l), 3);
  const Graph& lg = lp.model.builder.graph();
  int step_cuts = 0;
  for (const Cut& cut : find_cuts(lg)) {
    std::set<std::string> kinds;
    for (int u : cut.keep) {
      const std::string& nm = lg.node(u).name;
      if (lg.node(u).outputs[0].numel() == 1) continue;  // per-step losses waiting for the final sum
      kinds.insert(nm.substr(nm.rfind('/') + 1));
    }
    step_cuts += kinds == std::set<std::string>{"h", "c"} || kinds == std::set<std::string>{"h", "ig"};
  }
  EXPECT_GE(step_cuts, 11) << "12 steps: a cut crossed by {h, c} after (almost) every step";
}

TEST(MirrorPlanner, DropBnReluKeepsConvolutions) {
  const Config r = small_resnet();
  const Pipeline p = build_pipeline(r, static_data_shape(r), 4);
  const Graph& g = p.model.builder.graph();
  const MirrorPlan m = drop_bn_relu_plan(g);
  for (size_t v = 0; v < g.size(); ++v) {
    const std::string& op = g.node(static_cast<int>(v)).op->name;
    if (op == "conv2d" || op == "fully_connected") {
      EXPECT_EQ(m[v], 0);
    }
    if (op == "batch_norm" || op == "relu") {
      EXPECT_EQ(m[v], 1);
    }
  }
}

TEST(MirrorPlanner, SublinearSearchLogsEveryBudgetAndMemoryOrdering) {
  const Config r = load_config(MNEMO_SOURCE_DIR "/configs/resnet56-cifar.yaml");
  const Pipeline p = build_pipeline(r, static_data_shape(r), 16);
  const MirrorResult share = plan_pipeline(r, p, "share");
  const MirrorResult sub = plan_pipeline(r, p, "sublinear");
  const MirrorResult rec = plan_pipeline(r, p, "recursive");
  ASSERT_EQ(sub.search.size(), 8u) << "B = 0, sqrt(xy), and a 6-point grid";
  EXPECT_EQ(sub.search[0].budget, 0.0);
  int chosen = 0;
  int64_t best = INT64_MAX;
  for (const SearchStep& s : sub.search) {
    chosen += s.chosen;
    best = std::min(best, s.arena_bytes);
  }
  EXPECT_EQ(chosen, 1);
  EXPECT_EQ(sub.planned.report.arena_bytes, best) << "the least arena (feature maps, gradients, workspace) wins";
  EXPECT_LT(sub.planned.report.feature_map_bytes * 3, share.planned.report.feature_map_bytes);
  EXPECT_LT(rec.planned.report.feature_map_bytes, sub.planned.report.feature_map_bytes);
  // One extra forward, roughly: recompute between 20% and 50% of the plain step.
  const double overhead = sub.planned.report.recompute_flops / (sub.planned.report.step_flops - sub.planned.report.recompute_flops);
  EXPECT_GT(overhead, 0.2);
  EXPECT_LT(overhead, 0.5);
}

TEST(MirrorPlanner, ConfigOverridesWinOverPlanners) {
  Config c = small_resnet();
  const Pipeline p0 = build_pipeline(c, static_data_shape(c), 4);
  const Graph& g = p0.model.builder.graph();
  const int conv = g.find("stage1/block0/a/conv");
  ASSERT_GE(conv, 0);
  c.mirror["stage1/block0/a/conv"] = 2;
  const Pipeline p = build_pipeline(c, static_data_shape(c), 4);
  for (const std::string& m : {std::string("share"), std::string("drop-bn-relu"), std::string("sublinear")}) {
    const MirrorResult mr = plan_pipeline(c, p, m);
    EXPECT_EQ(mr.mirror[conv], 2) << m;
  }
  EXPECT_THROW(parse_memory_mode("recursive=0"), Error);
  EXPECT_THROW(parse_memory_mode("sublinar"), Error);
}

}  // namespace
}  // namespace mnemo::test

namespace mnemo::test {
namespace {

// `optimal` scores its candidates by exact plans: the chosen one has the least arena of those
// packed, every candidate stopped early has live bytes (a lower bound of its arena) above it, and
// it is never worse than share, drop-bn-relu or sublinear.
TEST(MirrorPlanner, OptimalChoosesTheLeastExactArenaAndNeverLosesToChensModes) {
  for (int i : {0, 1, 4}) {  // ResNet, the LSTM (where Chen's cuts win), DenseNet-121
    const Config c = model_config(i);
    const Pipeline p = build_pipeline(c, static_data_shape(c), c.data.batch);
    const MirrorResult opt = plan_pipeline(c, p, "optimal");
    const int64_t arena = opt.planned.report.arena_bytes;
    int chosen = 0;
    for (const SearchStep& s : opt.search) {
      ASSERT_FALSE(s.origin.empty());
      chosen += s.chosen;
      if (s.pruned) {
        EXPECT_GT(s.max_live_bytes, arena) << kModels[i];
      } else {
        EXPECT_GE(s.arena_bytes, arena) << kModels[i] << " " << s.origin;
      }
      if (s.chosen) {
        EXPECT_EQ(s.arena_bytes, arena);
      }
    }
    EXPECT_EQ(chosen, 1) << kModels[i];
    EXPECT_GT(opt.model_optimum, 0);
    EXPECT_GT(opt.max_terms, 0);
    for (const std::string& m : {std::string("share"), std::string("drop-bn-relu"), std::string("sublinear")})
      EXPECT_LE(arena, plan_pipeline(c, p, m).planned.report.arena_bytes) << kModels[i] << " vs " << m;
  }
}

}  // namespace
}  // namespace mnemo::test

namespace mnemo::test {
namespace {

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
                          "budget=1GiB:balance=1:balance=2", "budget=1GiB:exact:fast", "budget=:balance=1", "budget=1GiB::balance=1"})
    EXPECT_NE(error_of([&] { parse_memory_mode(bad); }).find("expected budget=SIZE"), std::string::npos) << bad;
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
        if (!st.pruned) EXPECT_EQ(st.fits, st.total_bytes <= b) << kModels[i] << " " << st.origin;
        if (st.pruned && !st.too_big) EXPECT_GE(st.recompute_cost, r.planned.report.recompute_cost) << kModels[i] << " " << st.origin;
      }
      if (std::any_of(r.mirror.begin(), r.mirror.end(), [](int k) { return k > 1; })) EXPECT_FALSE(r.bound_over_01);
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

// Fill members (docs/MEMORY.md "The family"): a plan filled up to a level has live bytes within it,
// the plan chosen at a member's own total never recomputes more than that member, a chosen fill
// member of each start computes bitwise what `none` computes, and a dense sweep (fills come and go
// with the levels below the limit) stays monotone.
TEST(MirrorPlanner, BudgetFillsStayWithinTheirLevelAndTheSweepStaysMonotone) {
  std::map<std::string, int> chosen_of;  // fill origin -> budgets (of both models) that chose one
  for (int i : {0, 4}) {  // ResNet, DenseNet-121
    const Config c = model_config(i);
    const Pipeline p = build_pipeline(c, static_data_shape(c), c.data.batch);
    const MirrorResult sub = plan_pipeline(c, p, "sublinear");
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
        if (st.origin == "fill" || st.origin == "fill+cheap") mine.insert({st.origin, st.budget, st.max_live_bytes, st.recompute_cost});
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
        if (st.origin != "fill" && st.origin != "fill+cheap") continue;
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
  std::printf("chosen: %d fill, %d fill+cheap\n", chosen_of["fill"], chosen_of["fill+cheap"]);
  EXPECT_GT(chosen_of["fill"], 0) << "no budget chose a fill from a member as it is";
  EXPECT_GT(chosen_of["fill+cheap"], 0) << "no budget chose a fill from the start with the cheap nodes dropped";
}

// A fill whose first exact plan overshoots its level is repaired: keeps live at its exact peak are
// let go until they cover the overshoot (docs/MEMORY.md "The family"). On an LSTM the estimate
// misses (a kept value's readers are recomputed later than the start recomputed it), so fills are
// repaired at every budget of this sweep; each must still be within its level, the choice within
// the budget and the sweep monotone.
TEST(MirrorPlanner, BudgetFillsRepairedAtTheirPeakStayWithinTheirLevel) {
  const Config c = parse_config("model: {type: lstm, layers: 2, hidden: 64, steps: 16, per_step: false}\n"
                                "data: {source: synthetic-seq, shape: [16, 20], classes: 10, batch: 128}\n"
                                "train: {steps: 1}\n", "lstm.yaml");
  const Pipeline p = build_pipeline(c, static_data_shape(c), c.data.batch);
  double last_recompute = -1;
  int64_t last_total = INT64_MAX;
  int repairs = 0, fills = 0;
  for (const char* ratio : {"0.7x", "0.6x", "0.5x", "0.4x", "0.35x"}) {
    const MirrorResult r = plan_pipeline(c, p, std::string("budget=") + ratio, nullptr, true);
    EXPECT_LE(r.planned.report.total_bytes, r.budget_bytes) << ratio;
    EXPECT_GE(r.planned.report.recompute_cost, last_recompute) << ratio;
    EXPECT_LE(r.planned.report.total_bytes, last_total) << ratio;
    last_recompute = r.planned.report.recompute_cost, last_total = r.planned.report.total_bytes;
    for (const SearchStep& st : r.search) {
      if (st.origin != "fill" && st.origin != "fill+cheap") continue;
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
