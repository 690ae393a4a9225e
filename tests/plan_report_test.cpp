// Memory reports of the reference configs: pinned feature_map_bytes per mode (a planner or
// autograd regression fails here, MXNet's mirror regression went unnoticed for years), the
// targets' ratios, and the accounting identities of the report.
#include "test_util.h"
#include "ops/conv2d.h"
#include "train/session/pipeline.h"

namespace mnemo::test {
namespace {

struct Pinned {
  const char* config;
  int64_t none, inplace, share;
};

// Regenerate with: build/mnemo plan configs/<name>.yaml --json (and explain the change in the commit).
// 2026-11-25: the LSTMs' none/inplace/share fell when weight gradients began to accumulate in the
// GEMM (fully_connected_grad_weight's accumulator input) instead of a contribution and an add per step.
const Pinned kPinned[] = {
    {"resnet20-fashion-mnist", 539590144, 319613440, 154195200},
    {"resnet56-cifar", 968980992, 561082368, 276899072},
    {"lstm-paper", 11786053376, 1758556928, 550975744},
    {"lstm-fashion-mnist", 178866688, 89581056, 26222848},
    {"resnet1000-imagenet", 120706631168, 66339803648, 32987225344},
};

// The ResNets in the plain layout (model.layout: auto picks the blocked one on CPUs whose oneDNN
// has a channel block; pinned below).
TEST(PlanReport, PinnedFeatureMapBytesOfReferenceConfigs) {
  for (const Pinned& p : kPinned) {
    Config c = load_config(std::string(MNEMO_SOURCE_DIR) + "/configs/" + p.config + ".yaml");
    c.resnet.layout = "plain";
    const Pipeline pl = build_pipeline(c, static_data_shape(c), c.data.batch);
    const int64_t want[3] = {p.none, p.inplace, p.share};
    const char* modes[3] = {"none", "inplace", "share"};
    for (int k = 0; k < 3; ++k) {
      const MemoryReport r = plan_pipeline(c, pl, modes[k]).planned.report;
      EXPECT_EQ(r.feature_map_bytes, want[k]) << p.config << " " << r.mode;
      if (k == 2) {
        EXPECT_LE(r.fragmentation, 0.02) << p.config;
        EXPECT_GE(static_cast<double>(p.none) / r.feature_map_bytes, 2.0) << p.config;
      }
    }
  }
}

// The same bytes whatever the block (8 or 16: ResNet's widths are multiples of both).
TEST(PlanReport, PinnedFeatureMapBytesOfTheBlockedLayout) {
  if (ops::conv::onednn_channel_block() == 0) GTEST_SKIP() << "oneDNN uses no channel-blocked layout on this CPU";
  for (const Pinned& p : {Pinned{"resnet20-fashion-mnist", 555646464, 335669760, 155768064},
                          Pinned{"resnet56-cifar", 979466752, 571568128, 277931264}}) {
    Config c = load_config(std::string(MNEMO_SOURCE_DIR) + "/configs/" + p.config + ".yaml");
    c.resnet.layout = "blocked";
    const Pipeline pl = build_pipeline(c, static_data_shape(c), c.data.batch);
    const int64_t want[3] = {p.none, p.inplace, p.share};
    const char* modes[3] = {"none", "inplace", "share"};
    for (int k = 0; k < 3; ++k) EXPECT_EQ(plan_pipeline(c, pl, modes[k]).planned.report.feature_map_bytes, want[k]) << p.config << " " << modes[k];
  }
}

TEST(PlanReport, AccountingIdentitiesHold) {
  const Config c = load_config(std::string(MNEMO_SOURCE_DIR) + "/configs/resnet20-fashion-mnist.yaml");
  const Pipeline pl = build_pipeline(c, static_data_shape(c), 16);
  const MirrorResult mr = plan_pipeline(c, pl, "share");
  const PlannedStep& ps = mr.planned;
  const MemoryReport& r = ps.report;
  EXPECT_EQ(r.total_bytes, r.arena_bytes + r.param_bytes + r.optimizer_bytes + r.input_bytes);
  EXPECT_EQ(r.arena_bytes, ps.plan.arena_bytes);
  // Feature maps, gradients and workspace share the arena: at most their sum, at least each.
  EXPECT_LE(r.arena_bytes, r.feature_map_bytes + r.workspace_bytes + r.param_grad_bytes);
  EXPECT_GE(r.arena_bytes, r.feature_map_bytes + r.workspace_bytes);
  EXPECT_GE(r.arena_bytes, r.param_grad_bytes);
  int64_t trainable = 0, params = 0;
  for (const ParamSpec& s : pl.model.builder.params()) {
    const int64_t b = static_cast<int64_t>(pl.model.builder.graph().node(s.node).outputs[0].bytes());
    params += b;
    if (s.trainable) trainable += b;
  }
  EXPECT_EQ(r.param_bytes, params);
  EXPECT_EQ(r.optimizer_bytes, trainable);  // SGD with momentum: one velocity per trainable parameter
  // A gradient dies at its update: the gradients' planned peak is far below all of them at once
  // (the largest is the 64x64x3x3 convolution's), and without updates it is all of them.
  EXPECT_LT(r.param_grad_bytes, trainable / 2);
  EXPECT_GE(r.param_grad_bytes, int64_t{64 * 64 * 9 * 4});
  const MemoryReport no_update = plan_pipeline(c, pl, "share", nullptr, false).planned.report;
  EXPECT_GE(no_update.param_grad_bytes, trainable);
  EXPECT_EQ(no_update.optimizer_bytes, 0);
  EXPECT_LT(r.total_bytes - r.optimizer_bytes, no_update.total_bytes);
  EXPECT_LE(r.max_live_bytes, r.arena_bytes);
  EXPECT_EQ(r.input_bytes, 16 * 28 * 28 * 4 + 16 * 4 + 4);  // data, labels, learning rate
  EXPECT_EQ(r.recompute_flops, 0.0);
  EXPECT_GT(r.step_flops, 3 * 16 * 30e6);  // ~3x the forward's ~40 MFLOP per 28x28 image
  ASSERT_NO_THROW(validate_plan(mr.training.graph, ps.plan));
  // Under a mirror plan the report counts the recomputation.
  Config mc = c;
  for (const Node& n : pl.model.builder.graph().nodes())
    if (n.op->name == "relu" || n.op->name == "batch_norm") mc.mirror[n.name] = 1;
  const Pipeline mp = build_pipeline(mc, static_data_shape(mc), 16);
  const MemoryReport rr = plan_pipeline(mc, mp, "share").planned.report;
  EXPECT_GT(rr.recompute_flops, 0.0);
  EXPECT_GT(rr.recompute_nodes, 20);
  EXPECT_LT(rr.feature_map_bytes, r.feature_map_bytes);
}

TEST(PlanReport, UnknownMirrorNodeIsAnError) {
  Config c = load_config(std::string(MNEMO_SOURCE_DIR) + "/configs/mlp-graph.yaml");
  c.mirror["nope"] = 1;
  EXPECT_THROW(build_pipeline(c, static_data_shape(c), c.data.batch), Error);
}

}  // namespace
}  // namespace mnemo::test
