// Non-finite values never hide: a NaN or Inf in the data, in a weight, or made by an overflow
// inside the graph stops `mnemo grad`, `train` and `bench` with a message naming the step and the
// first node holding it, and nothing is written (no gradient file, no checkpoint). Also: relu and
// max pooling propagate NaN as PyTorch does, and the tests' comparison helpers fail on NaN.
#include <filesystem>
#include <fstream>

#include "autograd/update.h"
#include "memory/planner.h"
#include "test_util.h"
#include "train/session/safetensors.h"
#include "train/session/sgd.h"
#include "train/session/step.h"
#include "train/session/session.h"

namespace mnemo::test {
namespace {

// The generic MLP config (configs/mlp-graph.yaml: data [32, 20], 5 classes) with `edit` applied.
std::string mlp_config(const TempDir& d, const std::string& from = "", const std::string& to = "") {
  std::ifstream in(MNEMO_SOURCE_DIR "/configs/mlp-graph.yaml");
  std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  if (!from.empty()) text.replace(text.find(from), from.size(), to);
  return d.file("mlp.yaml", text);
}

// The config's initial weights, with element 3 of `param` set to `value` (none when empty).
std::string weights(const TempDir& d, const std::string& cfg, const std::string& param = "", float value = 0,
                    float scale = 1) {
  TrainOptions o;
  o.config = cfg;
  o.save_init = d.file("init.safetensors");
  ::testing::internal::CaptureStdout();
  EXPECT_EQ(run_train(o), 0);
  ::testing::internal::GetCapturedStdout();
  TensorFile w = read_safetensors(o.save_init);
  std::vector<std::pair<std::string, TensorView>> ts;
  for (auto& [name, t] : w.tensors) {
    for (int64_t i = 0; i < t.numel(); ++i) t.as<float>()[i] *= scale;
    if (name == param) t.as<float>()[3] = value;
    ts.push_back({name, t.view()});
  }
  const std::string path = d.file("weights.safetensors");
  write_safetensors(path, ts, {{"format", "mnemo-weights-1"}});
  return path;
}

std::string batch(const TempDir& d, float bad = 0, int64_t at = -1) {
  Tensor x(DType::f32, {32, 20}), y(DType::i32, {32});
  fill_normal(x, 3);
  fill_ints(y, 4, 5);
  if (at >= 0) x.as<float>()[at] = bad;
  const std::string path = d.file("batch.safetensors");
  write_safetensors(path, {{"data", x.view()}, {"labels", y.view()}}, {});
  return path;
}

std::string grad_error(const TempDir& d, const std::string& cfg, const std::string& w, const std::string& b, GradOptions* out) {
  GradOptions g;
  g.config = cfg, g.weights = w, g.batch = b, g.out = d.file("grads.safetensors");
  *out = g;
  ::testing::internal::CaptureStdout();
  const std::string e = error_of([&] { run_grad(g); });
  ::testing::internal::GetCapturedStdout();
  return e;
}

TEST(NonFinite, NanAndInfInTheDataStopGradNamingTheInput) {
  for (const float bad : {NAN, INFINITY}) {
    TempDir d;
    const std::string cfg = mlp_config(d);
    GradOptions g;
    const std::string e = grad_error(d, cfg, weights(d, cfg), batch(d, bad, 45), &g);
    // NaN reaches the loss; Inf saturates tanh (a finite loss) but makes w1's gradient NaN.
    EXPECT_NE(e.find(bad != bad ? "the loss is not finite" : "the gradient 'grad/w1' is not finite"), std::string::npos) << e;
    EXPECT_NE(e.find("the first non-finite value is in the input 'data': element 45 = " + std::string(bad != bad ? "nan" : "inf")),
              std::string::npos) << e;
    EXPECT_NE(e.find("was not written"), std::string::npos) << e;
    EXPECT_FALSE(std::filesystem::exists(g.out)) << "nothing is written";
  }
}

TEST(NonFinite, NanInAWeightStopsGradAndTrainNamingTheParameter) {
  TempDir d;
  const std::string cfg = mlp_config(d);
  const std::string w = weights(d, cfg, "w2", NAN);
  GradOptions g;
  const std::string e = grad_error(d, cfg, w, batch(d), &g);
  EXPECT_NE(e.find("the first non-finite value is in the parameter 'w2': element 3 = nan"), std::string::npos) << e;
  EXPECT_FALSE(std::filesystem::exists(g.out));
  // Training from those weights stops at step 1; neither checkpoint is written.
  const std::string ckdir = (d.path / "ck").string();
  TrainOptions o;
  o.config = mlp_config(d, "memory: share", "memory: share\ncheckpoint: {dir: " + ckdir + ", every: 1}");
  o.init = w;
  o.checkpoint = d.file("final.safetensors");
  o.eval = false;
  ::testing::internal::CaptureStdout();
  const std::string t = error_of([&] { run_train(o); });
  ::testing::internal::GetCapturedStdout();
  EXPECT_NE(t.find("step 1 (lr 0.1): the loss is nan (no parameter was updated)"), std::string::npos) << t;
  EXPECT_NE(t.find("in the parameter 'w2': element 3 = nan"), std::string::npos) << t;
  EXPECT_NE(t.find("Nothing was saved"), std::string::npos) << t;
  EXPECT_FALSE(std::filesystem::exists(o.checkpoint));
  EXPECT_FALSE(std::filesystem::exists(ckdir + "/checkpoint.safetensors"));
}

TEST(NonFinite, AnOverflowInsideTheGraphNamesTheNodeInGradTrainAndBench) {
  TempDir d;
  const std::string cfg = mlp_config(d);
  // Weights 1e20 times larger: every value is finite, but logits = sum * w3 overflows float32.
  const std::string w = weights(d, cfg, "", 0, 1e20f);
  GradOptions g;
  const std::string e = grad_error(d, cfg, w, batch(d), &g);
  EXPECT_NE(e.find("the first non-finite value is output 0 of node 'logits' (fully_connected, forward)"), std::string::npos) << e;
  EXPECT_FALSE(std::filesystem::exists(g.out));
  TrainOptions o;
  o.config = cfg;
  o.init = w;
  o.eval = false;
  o.checkpoint = d.file("final.safetensors");
  ::testing::internal::CaptureStdout();
  const std::string t = error_of([&] { run_train(o); });
  ::testing::internal::GetCapturedStdout();
  EXPECT_NE(t.find("step 1 (lr 0.1): the loss is"), std::string::npos) << t;
  EXPECT_NE(t.find("output 0 of node 'logits' (fully_connected, forward)"), std::string::npos) << t;
  EXPECT_FALSE(std::filesystem::exists(o.checkpoint));
  // bench: the config's own initialisation, scaled up until the logits overflow.
  BenchOptions b;
  b.config = mlp_config(d, "w3: {shape: [5, 64], init: uniform, scale: 0.15}", "w3: {shape: [5, 64], init: uniform, scale: 1.0e+38}");
  b.steps = 1;
  b.warmup = 0;
  ::testing::internal::CaptureStdout();
  const std::string be = error_of([&] { run_bench(b); });
  ::testing::internal::GetCapturedStdout();
  EXPECT_NE(be.find("bench step 1: the loss is"), std::string::npos) << be;
  EXPECT_NE(be.find("node 'logits'"), std::string::npos) << be;
}

TEST(NonFinite, ANonFiniteGradientWithAFiniteLossStopsTheLaterUpdates) {
  // logits = (x w^T) * s with x = 1e10, w = 1e-20, s = 1e30: every forward value is finite and all
  // logits are equal (a finite loss), but backward's dh = dlogits * s ~ 1e29 makes dw = dh^T x
  // overflow. s's gradient comes first in backward (its update applies); w's is not finite, so
  // the status names update 1 (w) and w and its velocity stay as they were.
  Graph g;
  const EntryRef x = g.input("x", {DType::f32, {2, 3}});
  const EntryRef labels = g.input("labels", {DType::i32, {2}});
  const EntryRef w = g.param("w", {DType::f32, {4, 3}});
  const EntryRef sc = g.param("s", {DType::f32, {2, 4}});
  const EntryRef h = g.add1("fully_connected", {x, w}, {}, "h");
  const EntryRef logits = g.add1("mul", {h, sc}, {}, "logits");
  const EntryRef loss = g.add1("softmax_cross_entropy", {logits, labels}, {}, "loss");
  TrainingGraph tg = build_training_graph(g, loss, {});
  add_sgd_updates(tg, {0.9, 0.0});
  EXPECT_NE(tg.graph.to_text().find("optimizer/loss_check = finite_check(loss)"), std::string::npos);
  ASSERT_EQ(tg.graph.node(tg.grads.at(0).param).name, "w");
  Executor ex(tg.graph, plan_memory(tg.graph, AllocMode::share));
  Tensor xv(DType::f32, {2, 3}), lv(DType::i32, {2}), wv(DType::f32, {4, 3}), sv(DType::f32, {2, 4});
  Tensor vw(DType::f32, {4, 3}), vs(DType::f32, {2, 4}), lr(DType::f32, {1});
  for (int64_t i = 0; i < 6; ++i) xv.as<float>()[i] = 1e10f;
  for (int64_t i = 0; i < 12; ++i) wv.as<float>()[i] = 1e-20f, vw.as<float>()[i] = 0.5f;
  for (int64_t i = 0; i < 8; ++i) sv.as<float>()[i] = 1e30f, vs.as<float>()[i] = 0.5f;
  lv.as<int32_t>()[0] = 1, lv.as<int32_t>()[1] = 2;
  lr.as<float>()[0] = 0.1f;
  const Tensor w0 = clone(wv), vw0 = clone(vw), vs0 = clone(vs);
  ex.bind("x", xv.view());
  ex.bind("labels", lv.view());
  ex.bind("w", wv.view());
  ex.bind("s", sv.view());
  ex.bind("velocity/w", vw.view());
  ex.bind("velocity/s", vs.view());
  ex.bind(tg.lr, lr.view());
  ex.run();
  EXPECT_TRUE(std::isfinite(ex.fetch(tg.loss).as<float>()[0])) << "the loss is finite";
  EXPECT_EQ(ex.fetch(tg.status).as<int32_t>()[0], 1) << "update 1 (w) found its gradient not finite";
  EXPECT_TRUE(bitwise_equal(wv, w0)) << "w is unchanged";
  EXPECT_TRUE(bitwise_equal(vw, vw0)) << "w's velocity is unchanged";
  EXPECT_FALSE(bitwise_equal(vs, vs0)) << "s's update ran before w's gradient existed (its velocity moved)";
}

TEST(NonFinite, ReluAndMaxPoolingPropagateNanAsPyTorch) {
  Tensor x(DType::f32, {1, 1, 2, 2});
  x.as<float>()[0] = NAN, x.as<float>()[1] = -1, x.as<float>()[2] = 2, x.as<float>()[3] = -0.5f;
  const Tensor r = std::move(run("relu", {&x})[0]);
  EXPECT_TRUE(std::isnan(r.as<float>()[0])) << "relu(NaN) = NaN";
  EXPECT_EQ(r.as<float>()[1], 0.0f);
  EXPECT_EQ(r.as<float>()[2], 2.0f);
  Tensor dy(DType::f32, {1, 1, 2, 2});
  for (int i = 0; i < 4; ++i) dy.as<float>()[i] = 1.5f;
  const Tensor dx = std::move(run("relu_grad", {&r, &dy})[0]);
  EXPECT_EQ(dx.as<float>()[0], 1.5f) << "PyTorch's threshold_backward passes dy where y is NaN";
  EXPECT_EQ(dx.as<float>()[1], 0.0f);
  const Tensor p = std::move(run("max_pool2d", {&x}, {{"kernel", int64_t{2}}})[0]);
  EXPECT_TRUE(std::isnan(p.as<float>()[0])) << "max over a window holding NaN is NaN";
}

TEST(NonFinite, TheComparisonHelpersFailOnNanAndInf) {
  Tensor a(DType::f32, {3}), b(DType::f32, {3});
  for (int i = 0; i < 3; ++i) a.as<float>()[i] = b.as<float>()[i] = 1.0f + i;
  EXPECT_EQ(norm_rel_diff(a, b), 0.0);
  EXPECT_EQ(max_rel_diff(a, b), 0.0);
  for (const float bad : {NAN, INFINITY}) {
    Tensor g = clone(a);
    g.as<float>()[1] = bad;  // a gradient with one bad element
    EXPECT_FALSE(norm_rel_diff(g, b) <= 1e-4) << bad;
    EXPECT_FALSE(norm_rel_diff(b, g) <= 1e-4) << bad;
    EXPECT_FALSE(max_rel_diff(g, b) <= 1e-4) << bad;
    EXPECT_FALSE(norm_rel_diff(g, g) <= 1e-4) << "NaN/Inf on both sides fails too";
  }
  Tensor all_nan(DType::f32, {3});
  for (int i = 0; i < 3; ++i) all_nan.as<float>()[i] = NAN;
  EXPECT_FALSE(norm_rel_diff(all_nan, b) <= 1e-4) << "an all-NaN gradient fails";
}

}  // namespace
}  // namespace mnemo::test

namespace mnemo::test {
namespace {

// An update whose gradient is finite but whose new velocity overflows is refused too (a weight
// never becomes Inf silently), and nothing of it is written.
TEST(NonFinite, AnOverflowingUpdateIsRefusedWithoutWriting) {
  Graph g;
  const EntryRef x = g.input("x", {DType::f32, {2, 3}});
  const EntryRef labels = g.input("labels", {DType::i32, {2}});
  const EntryRef w = g.param("w", {DType::f32, {4, 3}});
  const EntryRef loss = g.add1("softmax_cross_entropy", {g.add1("fully_connected", {x, w}, {}, "y"), labels}, {}, "loss");
  TrainingGraph tg = build_training_graph(g, loss, {});
  add_sgd_updates(tg, {0.9, 0.0});
  Executor ex(tg.graph, plan_memory(tg.graph, AllocMode::share));
  Tensor xv(DType::f32, {2, 3}), lv(DType::i32, {2}), wv(DType::f32, {4, 3}), vel(DType::f32, {4, 3}), lr(DType::f32, {1});
  fill_normal(xv, 1);
  fill_ints(lv, 2, 4);
  fill_normal(wv, 3, 0.1);
  for (int64_t i = 0; i < 12; ++i) vel.as<float>()[i] = 3.3e38f;  // 0.9 v + g stays finite, w - lr v does not
  lr.as<float>()[0] = 2.0f;
  const Tensor w0 = clone(wv), v0 = clone(vel);
  ex.bind("x", xv.view());
  ex.bind("labels", lv.view());
  ex.bind("w", wv.view());
  ex.bind("velocity/w", vel.view());
  ex.bind(tg.lr, lr.view());
  ex.run();
  EXPECT_TRUE(std::isfinite(ex.fetch(tg.loss).as<float>()[0]));
  EXPECT_EQ(ex.fetch(tg.status).as<int32_t>()[0], 1);
  EXPECT_TRUE(bitwise_equal(wv, w0)) << "no partial write of the weight";
  EXPECT_TRUE(bitwise_equal(vel, v0)) << "no partial write of the velocity";
}

// A failed step leaves the BatchNorm running statistics as they were (they are assign nodes gated
// on the step's status), so the diagnosis names the data, not a running statistic.
TEST(NonFinite, AFailedStepKeepsTheRunningStatistics) {
  const Config c = parse_config("model: {type: resnet, style: cifar, depth: 8, width: 4}\n"
                                "data: {source: synthetic, shape: [3, 8, 8], classes: 3, batch: 4}\ntrain: {steps: 1}\n",
                                "r.yaml");
  const Pipeline p = build_pipeline(c, static_data_shape(c), 4);
  std::unique_ptr<Device> dev = open_device("cpu");
  ParamStore params(p.model.builder.graph(), p.model.builder.params(), 1);
  Sgd sgd(params, {0.1, 0.9, 0.0});
  BoundStep step(plan_step(c, p, *dev, true, false, 0), p, params, &sgd, *dev);
  std::map<std::string, Tensor> before;
  for (const ParamSpec& s : params.specs()) before.emplace(s.name, clone(params.at(s.name)));
  Tensor x(step.input_type(p.model.data)), y(step.input_type(p.model.labels));
  fill_normal(x, 1);
  fill_ints(y, 2, 3);
  x.as<float>()[7] = NAN;
  step.bind_host(x, y);
  step.set_lr(0.1);
  step.run();
  const std::string e = error_of([&] { step.finish("step 1"); });
  EXPECT_NE(e.find("step 1: the loss is nan (no parameter was updated)"), std::string::npos) << e;
  EXPECT_NE(e.find("the first non-finite value is in the input 'data': element 7 = nan"), std::string::npos) << e;
  int stats = 0;
  for (const ParamSpec& s : params.specs()) {
    EXPECT_TRUE(bitwise_equal(params.at(s.name), before.at(s.name))) << s.name << " changed in a failed step";
    stats += !s.trainable;
  }
  EXPECT_GT(stats, 4) << "the model has running statistics";
}

// The running statistics: the training step never reads them, so a non-finite one in --init or a
// checkpoint is refused at load, naming the file, the tensor and the element (before, evaluation
// printed a test loss of nan, exit 0, and the checkpoint kept the NaN); and a test loss that is not
// finite (here from a running mean of -3e38, finite, which evaluation's normalisation overflows)
// ends the run with an error.
TEST(NonFinite, RunningStatisticsAreCheckedAtLoadAndEvaluationLossMustBeFinite) {
  TempDir d;
  const std::string cfg = d.file("r.yaml",
                                 "model: {type: resnet, style: cifar, depth: 8, width: 4}\n"
                                 "data: {source: synthetic, shape: [3, 8, 8], classes: 3, batch: 4, size: 8, eval_size: 4}\n"
                                 "train: {steps: 1}\n");
  auto train = [&](TrainOptions o) {
    o.config = cfg;
    ::testing::internal::CaptureStdout();
    const std::string e = error_of([&] { run_train(o); });
    ::testing::internal::GetCapturedStdout();
    return e;
  };
  // Rewrites `path` with element 0 of `name` set to `value` (checksums made anew, metadata kept).
  auto edit = [&](const std::string& path, const std::string& name, float value) {
    TensorFile f = read_safetensors(path);
    f.tensors.at(name).as<float>()[0] = value;
    std::vector<std::pair<std::string, TensorView>> ts;
    for (auto& [n, t] : f.tensors) ts.push_back({n, t.view()});
    write_safetensors(path, ts, f.metadata);
  };
  TrainOptions init;
  init.save_init = d.file("init.safetensors");
  ASSERT_EQ(train(init), "(no error)");
  edit(init.save_init, "stem/bn/running_mean", NAN);
  TrainOptions from;
  from.init = init.save_init;
  from.checkpoint = d.file("final.safetensors");
  std::string e = train(from);
  EXPECT_NE(e.find("--init " + init.save_init + ": 'stem/bn/running_mean' element 0 = nan: running statistics must be finite"),
            std::string::npos) << e;
  EXPECT_FALSE(std::filesystem::exists(from.checkpoint));
  // A checkpoint: made by a good run, then edited.
  TrainOptions good;
  good.checkpoint = d.file("good.safetensors");
  good.eval = false;
  ASSERT_EQ(train(good), "(no error)");
  edit(good.checkpoint, "param/stem/bn/running_var", INFINITY);
  TrainOptions resume;
  resume.resume = good.checkpoint;
  e = train(resume);
  EXPECT_NE(e.find("checkpoint " + good.checkpoint + ": 'param/stem/bn/running_var' element 0 = inf"), std::string::npos) << e;
  // A finite running mean that evaluation's normalisation overflows.
  ASSERT_EQ(train(init), "(no error)");
  edit(init.save_init, "stem/bn/running_mean", -3e38f);
  from.eval = true;
  e = train(from);
  EXPECT_NE(e.find("evaluation after step 1: the test loss is nan"), std::string::npos) << e;
}

}  // namespace
}  // namespace mnemo::test
