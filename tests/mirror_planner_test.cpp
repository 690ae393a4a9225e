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
#include "mirror_models.h"
#include "ops/conv2d.h"
#include "test_util.h"
#include "train/session/param_store.h"
#include "train/session/pipeline.h"
#include "train/session/sgd.h"

namespace mnemo::test {
namespace {

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
  for (const std::string m : {"share", "sublinear", "optimal"}) {
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
  const MirrorResult sub = plan_pipeline(r, p, "sublinear:chen");  // (Chen's plan as his search gives it)
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

// sublinear fills Chen's plan at its own peak (Chen et al. Sec. 4.3): never a larger total or a
// higher live-bytes peak than Chen's plan (sublinear:chen), never more recompute; on ResNet-56 it
// keeps convolutions back and recomputes less, and reports Chen's plan; on the LSTM nothing more
// fits below the peak and Chen's plan stays. Both compute bitwise what `none` does (EveryMode).
TEST(MirrorPlanner, SublinearFillsChensPlanAtItsOwnPeak) {
  Config r = load_config(MNEMO_SOURCE_DIR "/configs/resnet56-cifar.yaml");
  for (int64_t batch : {16, 64}) {
    SCOPED_TRACE("ResNet-56 batch " + std::to_string(batch));
    const Pipeline p = build_pipeline(r, static_data_shape(r), batch);
    const MirrorResult chen = plan_pipeline(r, p, "sublinear:chen");
    const MirrorResult sub = plan_pipeline(r, p, "sublinear");
    EXPECT_FALSE(chen.filled);
    EXPECT_EQ(chen.chen_total, -1);
    EXPECT_TRUE(sub.filled);
    EXPECT_EQ(sub.chen_total, chen.planned.report.total_bytes);
    EXPECT_EQ(sub.chen_recompute_flops, chen.planned.report.recompute_flops);
    EXPECT_LE(sub.planned.report.total_bytes, chen.planned.report.total_bytes);
    EXPECT_LE(sub.planned.report.max_live_bytes, chen.planned.report.max_live_bytes);
    EXPECT_LT(sub.planned.report.recompute_cost, chen.planned.report.recompute_cost);
    EXPECT_LT(sub.planned.report.recompute_flops, 0.9 * chen.planned.report.recompute_flops);
    int kept_back = 0;  // dropped by Chen's plan, kept by the fill: convolutions among them
    for (size_t v = 0; v < sub.mirror.size(); ++v)
      kept_back += chen.mirror[v] > 0 && sub.mirror[v] == 0 && p.model.builder.graph().node(static_cast<int>(v)).op->name == "conv2d";
    EXPECT_GT(kept_back, 0);
    EXPECT_EQ(sub.search.size(), chen.search.size());  // Chen's search log, as it was
  }
  const Config l = small_lstm();
  const Pipeline pl = build_pipeline(l, static_data_shape(l), l.data.batch);
  const MirrorResult lsub = plan_pipeline(l, pl, "sublinear"), lchen = plan_pipeline(l, pl, "sublinear:chen");
  EXPECT_LE(lsub.planned.report.total_bytes, lchen.planned.report.total_bytes);
  EXPECT_LE(lsub.planned.report.recompute_cost, lchen.planned.report.recompute_cost);
  EXPECT_EQ(lsub.chen_total, lchen.planned.report.total_bytes);
  // DenseNet-121 at batch 32: its fills (38% of Chen's recompute) pack above Chen's arena (here
  // 716.3 against 713.5 MB when taken anyway: the test fails with the total's rule left out), so
  // Chen's plan stays; never a larger total.
  const Config d = load_config(MNEMO_SOURCE_DIR "/configs/table2/densenet121.yaml");
  const Pipeline pd = build_pipeline(d, static_data_shape(d), d.data.batch);
  const MirrorResult dsub = plan_pipeline(d, pd, "sublinear"), dchen = plan_pipeline(d, pd, "sublinear:chen");
  EXPECT_EQ(dsub.chen_total, dchen.planned.report.total_bytes);
  EXPECT_LE(dsub.planned.report.total_bytes, dchen.planned.report.total_bytes);
  EXPECT_LE(dsub.planned.report.recompute_cost, dchen.planned.report.recompute_cost);
  EXPECT_NE(test::error_of([] { parse_memory_mode("sublinear:fast"); }).find("sublinear:chen"), std::string::npos);
}

// The mirror searches build their throwaway training graphs without the name index
// (build_training_graph's index_names = false, budget's light results): the same nodes, in the
// same order, with the same inputs, types, roles and sources, so the same plan and report; only
// the names go unchecked, and looking one up is an error.
TEST(MirrorPlanner, TrainingGraphsWithoutTheNameIndexPlanTheSame) {
  const Config r = load_config(MNEMO_SOURCE_DIR "/configs/resnet56-cifar.yaml");
  const Pipeline p = build_pipeline(r, static_data_shape(r), 8);
  const Graph& fwd = p.model.builder.graph();
  for (const char* mode : {"share", "sublinear", "budget=0.5x"}) {
    SCOPED_TRACE(mode);
    const MirrorPlan m = plan_pipeline(r, p, mode).mirror;
    TrainingGraph a = build_training_graph(fwd, p.model.loss, m);
    TrainingGraph b = build_training_graph(fwd, p.model.loss, m, false);
    EXPECT_TRUE(a.graph.names_indexed());
    EXPECT_FALSE(b.graph.names_indexed());
    add_sgd_updates(a, {0.9, 1e-4});
    add_sgd_updates(b, {0.9, 1e-4});
    ASSERT_EQ(a.graph.size(), b.graph.size());
    EXPECT_GT(a.graph.size(), fwd.size() * 2);
    for (size_t v = 0; v < a.graph.size(); ++v) {
      const Node &x = a.graph.node(static_cast<int>(v)), &y = b.graph.node(static_cast<int>(v));
      ASSERT_EQ(x.op, y.op) << x.name;
      EXPECT_EQ(x.inputs, y.inputs) << x.name;
      EXPECT_EQ(x.outputs, y.outputs) << x.name;
      EXPECT_EQ(x.role, y.role) << x.name;
      EXPECT_EQ(x.source, y.source) << x.name;
    }
    EXPECT_EQ(a.graph.outputs, b.graph.outputs);
    EXPECT_EQ(a.optimizer_state, b.optimizer_state);
    EXPECT_EQ(a.status, b.status);
    const MemoryReport ra = plan_training_step(a, AllocMode::share).report, rb = plan_training_step(b, AllocMode::share).report;
    EXPECT_EQ(ra.max_live_bytes, rb.max_live_bytes);
    EXPECT_EQ(ra.arena_bytes, rb.arena_bytes);
    EXPECT_EQ(ra.total_bytes, rb.total_bytes);
    EXPECT_EQ(ra.recompute_cost, rb.recompute_cost);
    EXPECT_GE(a.graph.find("optimizer/lr"), 0);
    EXPECT_THROW(b.graph.find("optimizer/lr"), Error);
  }
}

TEST(MirrorPlanner, ConfigOverridesWinOverPlanners) {
  Config c = small_resnet();
  const Pipeline p0 = build_pipeline(c, static_data_shape(c), 4);
  const Graph& g = p0.model.builder.graph();
  const int conv = g.find("stage1/block0/a/conv");
  ASSERT_GE(conv, 0);
  c.mirror["stage1/block0/a/conv"] = 2;
  const Pipeline p = build_pipeline(c, static_data_shape(c), 4);
  for (const std::string& m : {std::string("share"), std::string("drop-bn-relu"), std::string("sublinear"), std::string("budget=0.9x"),
                                std::string("budget=0.9x:search"), std::string("budget=0.9x:exact=2")}) {
    const MirrorResult mr = plan_pipeline(c, p, m);
    EXPECT_EQ(mr.mirror[conv], 2) << m;
    // budget's local search and programme leave a config with overrides alone (a move could undo
    // one): the family's choice, and the knapsack bound.
    if (m.rfind("budget", 0) == 0) {
      EXPECT_EQ(mr.search_moves, -1) << m;
      EXPECT_EQ(mr.solver_status.rfind("no programme (per-node mirror overrides)", 0), 0u) << m << ": " << mr.solver_status;
    }
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
