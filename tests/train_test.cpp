// Training sessions: a resumed run continues bit-identically; corrupt or foreign checkpoints are
// refused with a clear message and leave the run untouched; divergence stops with a message;
// `mnemo grad` on the PyTorch fixtures reproduces PyTorch's gradients; schedules.
#include <filesystem>
#include <fstream>

#include <nlohmann/json.hpp>

#include "test_util.h"
#include "train/session/metrics.h"
#include "train/session/safetensors.h"
#include "train/config/schedule.h"
#include "train/session/session.h"

namespace mnemo::test {
namespace {

namespace fs = std::filesystem;

// A tiny ResNet (BN running statistics, momentum, warm-up + cosine: everything that must resume).
std::string tiny_config(const std::string& extra = "") {
  return "model: {type: resnet, style: cifar, depth: 8, width: 4}\n"
         "data: {source: synthetic, shape: [3, 8, 8], classes: 3, batch: 4, size: 40, eval_size: 8}\n"
         "optimizer: {lr: 0.05, momentum: 0.9, weight_decay: 0.001}\n"
         "schedule: {type: cosine, warmup_steps: 3}\n"
         "train: {steps: 8, seed: 3, threads: 1}\n" + extra;
}

TensorFile run_to_checkpoint(const TempDir& d, const std::string& cfg, int64_t steps, const std::string& name,
                             const std::string& resume = "") {
  TrainOptions o;
  o.config = cfg;
  o.steps = steps;
  o.checkpoint = d.file(name);
  o.resume = resume;
  o.eval = false;
  EXPECT_EQ(run_train(o), 0);
  return read_safetensors(o.checkpoint);
}

// 6 steps, then resume to 13: the step schedule's milestone (9) and the epoch boundary (10
// batches) are both crossed after the resume; BN statistics, momentum and data order must carry over.
TEST(Train, ResumeEqualsStraightRunBitwise) {
  TempDir d;
  const std::string cfg = d.file("c.yaml",
                                 "model: {type: resnet, style: cifar, depth: 8, width: 4}\n"
                                 "data: {source: synthetic, shape: [3, 8, 8], classes: 3, batch: 4, size: 40, eval_size: 8}\n"
                                 "optimizer: {lr: 0.05, momentum: 0.9, weight_decay: 0.001}\n"
                                 "schedule: {type: step, milestones: [9], gamma: 0.5}\n"
                                 "train: {steps: 13, seed: 3, threads: 1}\n");
  TensorFile straight = run_to_checkpoint(d, cfg, 13, "straight.safetensors");
  run_to_checkpoint(d, cfg, 6, "six.safetensors");
  TensorFile resumed = run_to_checkpoint(d, cfg, 13, "resumed.safetensors", d.file("six.safetensors"));
  ASSERT_EQ(straight.tensors.size(), resumed.tensors.size());
  int running = 0;
  for (const auto& [name, t] : straight.tensors) {
    EXPECT_TRUE(bitwise_equal(t, resumed.tensors.at(name))) << name << " differs after resume";
    running += name.find("running_mean") != std::string::npos;
  }
  EXPECT_GT(running, 0) << "BatchNorm running statistics are part of the checkpoint";
  EXPECT_EQ(resumed.metadata.at("data_position"), "13");  // crossed the epoch boundary at 10
}

// A model with dropout: the masks are a function of the global step, so a resumed run draws the
// ones the straight run drew.
TEST(Train, ResumeWithDropoutEqualsStraightRunBitwise) {
  TempDir d;
  const std::string cfg = d.file("c.yaml",
                                 "model: {type: mobilenet_v2, width_mult: 0.25}\n"
                                 "data: {source: synthetic, shape: [3, 32, 32], classes: 3, batch: 4, size: 40, eval_size: 8}\n"
                                 "optimizer: {lr: 0.05, momentum: 0.9}\n"
                                 "train: {steps: 6, seed: 3, threads: 1}\n");
  TensorFile straight = run_to_checkpoint(d, cfg, 6, "straight.safetensors");
  run_to_checkpoint(d, cfg, 3, "three.safetensors");
  TensorFile resumed = run_to_checkpoint(d, cfg, 6, "resumed.safetensors", d.file("three.safetensors"));
  ASSERT_EQ(straight.tensors.size(), resumed.tensors.size());
  for (const auto& [name, t] : straight.tensors) EXPECT_TRUE(bitwise_equal(t, resumed.tensors.at(name))) << name;
}

TEST(Train, RefusesCorruptAndForeignCheckpoints) {
  TempDir d;
  const std::string cfg = d.file("c.yaml", tiny_config());
  run_to_checkpoint(d, cfg, 2, "good.safetensors");
  auto resume_error = [&](const std::string& ck) {
    TrainOptions o;
    o.config = cfg;
    o.steps = 3;
    o.resume = ck;
    o.eval = false;
    try {
      run_train(o);
    } catch (const Error& e) {
      return std::string(e.what());
    }
    return std::string();
  };
  // Truncated file.
  const std::string trunc = d.file("trunc.safetensors");
  fs::copy_file(d.file("good.safetensors"), trunc);
  fs::resize_file(trunc, fs::file_size(trunc) / 2);
  std::string e = resume_error(trunc);
  EXPECT_NE(e.find("trunc.safetensors"), std::string::npos) << e;
  // A checkpoint of another model (depth 14 has more blocks).
  const std::string other = d.file("other.yaml", tiny_config().replace(tiny_config().find("depth: 8"), 8, "depth: 14"));
  run_to_checkpoint(d, other, 1, "other.safetensors");
  e = resume_error(d.file("other.safetensors"));
  EXPECT_NE(e.find("does not fit this model"), std::string::npos) << e;
  // A weights file is not a checkpoint.
  TrainOptions init;
  init.config = cfg;
  init.save_init = d.file("init.safetensors");
  ASSERT_EQ(run_train(init), 0);
  e = resume_error(init.save_init);
  EXPECT_NE(e.find("not a mnemo checkpoint"), std::string::npos) << e;
}

TEST(Train, DivergenceStopsWithAClearMessage) {
  TempDir d;
  // The generic MLP config with an absurd learning rate: the weights overflow float32 within a
  // few steps and the loss becomes inf/nan.
  std::ifstream in(MNEMO_SOURCE_DIR "/configs/mlp-graph.yaml");
  std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  text.replace(text.find("lr: 0.1"), 7, "lr: 1.0e+30");
  const std::string cfg = d.file("c.yaml", text);
  for (const char* device : {"cpu", "host"}) {
    TrainOptions o;
    o.config = cfg;
    o.device = device;
    o.eval = false;
    try {
      run_train(o);
      FAIL() << "training with lr 1e30 should diverge";
    } catch (const Error& e) {
      const std::string m = e.what();
      EXPECT_NE(m.find("Training diverged"), std::string::npos) << m;
      EXPECT_NE(m.find("step 2 (lr 1e+30): the loss is"), std::string::npos) << m;
      EXPECT_NE(m.find("the first non-finite value is output 0 of node 'logits' (fully_connected, forward)"), std::string::npos) << m;
      EXPECT_NE(m.find("Nothing was saved"), std::string::npos) << m;
      // Only a GPU's kernels cannot reject a bad label (the CPU's throw): no such hint here.
      EXPECT_EQ(m.find("label outside"), std::string::npos) << m;
    }
  }
}

// `mnemo grad` on the committed PyTorch fixture (the same model as pytorch_match_test): the
// command-line path (config, weights file, batch file, output file) reproduces PyTorch.
TEST(Train, GradCommandMatchesPyTorchFixture) {
  TempDir d;
  const std::string cfg = d.file("r8.yaml", "model: {type: resnet, style: cifar, depth: 8, width: 4}\n"
                                            "data: {source: synthetic, shape: [3, 8, 8], classes: 5, batch: 4}\n"
                                            "train: {steps: 1}\nmemory: share\n");
  GradOptions g;
  g.config = cfg;
  g.weights = MNEMO_FIXTURE_DIR "/resnet_init.safetensors";
  g.batch = MNEMO_FIXTURE_DIR "/resnet_batch.safetensors";
  g.out = d.file("grads.safetensors");
  ASSERT_EQ(run_grad(g), 0);
  TensorFile out = read_safetensors(g.out);
  TensorFile want = read_safetensors(MNEMO_FIXTURE_DIR "/resnet_expected.safetensors");
  int grads = 0;
  for (const auto& [name, t] : want.tensors) {
    if (name != "loss" && name.rfind("grad/", 0) != 0) continue;
    ASSERT_TRUE(out.tensors.count(name)) << name;
    EXPECT_LE(norm_rel_diff(out.tensors.at(name), t), 1e-4) << name;
    grads += name != "loss";
  }
  EXPECT_GT(grads, 10);
  // Weights with a wrong shape are refused, naming the tensor.
  GradOptions bad = g;
  bad.weights = MNEMO_FIXTURE_DIR "/lstm_init.safetensors";
  try {
    run_grad(bad);
    FAIL();
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("has no tensor"), std::string::npos) << e.what();
  }
}

TEST(Train, EvaluationAndMetricsLines) {
  TempDir d;
  const std::string metrics = d.file("m.jsonl");
  const std::string cfg = d.file("c.yaml", tiny_config().replace(tiny_config().find("train: {"), 8,
                                                                 "train: {metrics: " + metrics + ", eval_every: 2, "));
  TrainOptions o;
  o.config = cfg;
  o.steps = 5;
  ASSERT_EQ(run_train(o), 0);
  std::ifstream in(metrics);
  int steps = 0, evals = 0;
  for (std::string line; std::getline(in, line);) {
    steps += line.find("\"loss\"") != std::string::npos;
    if (line.find("\"test_accuracy\"") != std::string::npos) {
      ++evals;
      const double acc = std::stod(line.substr(line.find("\"test_accuracy\":") + 16));
      EXPECT_GE(acc, 0.0);
      EXPECT_LE(acc, 1.0);
    }
  }
  EXPECT_EQ(steps, 5);      // one line per step ("test_loss" does not match "loss" with its quotes)
  EXPECT_EQ(evals, 3);      // after steps 2 and 4, and at the end
}

// The test loss of a built-in model covers every example, the partial last batch's too: the mean
// softmax cross-entropy of the logits' rows, scored on the host, the same whatever the evaluation
// batch (it was the full batches' only, 8 of 10 examples at eval_batch 4). A graph config's loss
// stays its graph's, over the full batches.
TEST(Train, TestLossCoversEveryExampleWhateverTheEvalBatch) {
  TempDir d;
  auto test_loss = [&](const std::string& model, const std::string& data, int eval_batch, int64_t* examples) {
    const std::string metrics = d.file("m" + std::to_string(eval_batch) + ".jsonl");
    std::filesystem::remove(metrics);
    const std::string cfg = d.file("c.yaml", model + "data: {" + data + ", eval_size: 10, eval_batch: " + std::to_string(eval_batch) +
                                                 "}\noptimizer: {lr: 0.05, momentum: 0.9}\ntrain: {steps: 2, seed: 3, threads: 1, metrics: " +
                                                 metrics + "}\n");
    TrainOptions o;
    o.config = cfg;
    EXPECT_EQ(run_train(o), 0);
    std::ifstream in(metrics);
    std::string last;
    for (std::string line; std::getline(in, line);) last = line;
    const nlohmann::json j = nlohmann::json::parse(last);
    *examples = j.at("test_loss_examples").get<int64_t>();
    EXPECT_EQ(j.at("test_examples").get<int64_t>(), *examples);
    return j.at("test_loss").get<double>();
  };
  struct Case {
    std::string model, data;
    int64_t scored;  // rows scored: examples, or examples x steps for per-step classifiers
  };
  for (const Case& k : {Case{"model: {type: resnet, style: cifar, depth: 8, width: 4}\n", "source: synthetic, shape: [3, 8, 8], classes: 3, batch: 4, size: 16", 10},
                        Case{"model: {type: lstm, layers: 1, hidden: 8, per_step: true}\n", "source: synthetic-seq, shape: [6, 5], classes: 7, batch: 4, size: 16", 60}}) {
    SCOPED_TRACE(k.model);
    int64_t n10 = 0, n4 = 0, n3 = 0;
    const double l10 = test_loss(k.model, k.data, 10, &n10), l4 = test_loss(k.model, k.data, 4, &n4), l3 = test_loss(k.model, k.data, 3, &n3);
    EXPECT_EQ(n10, k.scored);
    EXPECT_EQ(n4, k.scored);
    EXPECT_EQ(n3, k.scored);
    ASSERT_TRUE(std::isfinite(l10) && l10 > 0) << l10;
    EXPECT_NEAR(l4, l10, 1e-5 * l10);
    EXPECT_NEAR(l3, l10, 1e-5 * l10);
  }
}

TEST(Schedule, WarmupStepAndCosine) {
  OptimizerConfig o;
  o.lr = 0.4;
  ScheduleConfig s;
  s.type = "step";
  s.milestones = {10, 20};
  s.gamma = 0.1;
  EXPECT_DOUBLE_EQ(learning_rate(o, s, 9, 30), 0.4);
  EXPECT_NEAR(learning_rate(o, s, 10, 30), 0.04, 1e-12);
  EXPECT_NEAR(learning_rate(o, s, 25, 30), 0.004, 1e-12);
  s = ScheduleConfig{};
  s.type = "cosine";
  s.warmup_steps = 4;
  EXPECT_NEAR(learning_rate(o, s, 0, 100), 0.4 * 0.25 * 0.5 * (1 + std::cos(0.0)), 1e-12);
  EXPECT_NEAR(learning_rate(o, s, 50, 100), 0.2, 1e-12);
  EXPECT_NEAR(learning_rate(o, s, 100, 100), 0.0, 1e-12);
}

}  // namespace
}  // namespace mnemo::test

namespace mnemo::test {
namespace {

// `mnemo train --init W`: the run starts from W (the saved default initialisation reproduces the
// default run bit for bit; other weights give another run); a file that does not fit is refused
// naming the tensor, before anything trains.
TEST(Train, InitStartsFromGivenWeights) {
  TempDir d;
  const std::string cfg = d.file("c.yaml", "model: {type: resnet, style: cifar, depth: 8, width: 4}\n"
                                           "data: {source: synthetic, shape: [3, 8, 8], classes: 3, batch: 4, size: 16, eval_size: 4}\n"
                                           "train: {steps: 3, seed: 2, threads: 1}\nmemory: share\n");
  auto train = [&](const std::string& init, const std::string& out) {
    TrainOptions o;
    o.config = cfg, o.init = init, o.checkpoint = d.file(out), o.eval = false;
    ::testing::internal::CaptureStdout();
    EXPECT_EQ(run_train(o), 0);
    ::testing::internal::GetCapturedStdout();
    return read_safetensors(o.checkpoint);
  };
  TrainOptions s;
  s.config = cfg, s.save_init = d.file("init.safetensors");
  ::testing::internal::CaptureStdout();
  ASSERT_EQ(run_train(s), 0);
  ::testing::internal::GetCapturedStdout();
  const TensorFile plain = train("", "plain.safetensors"), same = train(s.save_init, "same.safetensors");
  for (const auto& [name, t] : plain.tensors) EXPECT_TRUE(bitwise_equal(t, same.tensors.at(name))) << name;
  TensorFile w = read_safetensors(s.save_init);
  std::vector<std::pair<std::string, TensorView>> half;
  for (auto& [name, t] : w.tensors) {
    for (int64_t i = 0; i < t.numel(); ++i) t.as<float>()[i] *= 0.5f;
    half.push_back({name, t.view()});
  }
  write_safetensors(d.file("half.safetensors"), half, {});
  const TensorFile other = train(d.file("half.safetensors"), "other.safetensors");
  EXPECT_FALSE(bitwise_equal(plain.tensors.at("param/fc/weight"), other.tensors.at("param/fc/weight")));
  // Misfits are refused naming the tensor; --init with --resume is refused.
  half.pop_back();
  write_safetensors(d.file("short.safetensors"), half, {});
  TrainOptions bad;
  bad.config = cfg, bad.init = d.file("short.safetensors"), bad.eval = false;
  const std::string e = error_of([&] { run_train(bad); });
  EXPECT_NE(e.find("--init " + bad.init + " has no tensor '"), std::string::npos) << e;
  bad.init = s.save_init;
  bad.resume = d.file("same.safetensors");
  EXPECT_NE(error_of([&] { run_train(bad); }).find("--init and --resume exclude each other"), std::string::npos);
}

}  // namespace
}  // namespace mnemo::test

namespace mnemo::test {
namespace {

// The metrics file after a kill: records are whole lines; --resume cuts it back to the steps the
// checkpoint holds (a torn last line and the records of lost steps go), so no step is recorded twice.
TEST(Train, MetricsAreCutBackOnResumeAndNeverTorn) {
  TempDir d;
  const std::string metrics = (d.path / "m" / "metrics.jsonl").string();
  const std::string cfg = d.file("c.yaml", "model: {type: resnet, style: cifar, depth: 8, width: 4}\n"
                                           "data: {source: synthetic, shape: [3, 8, 8], classes: 3, batch: 4, size: 16, eval_size: 4}\n"
                                           "train: {steps: 4, seed: 2, threads: 1, metrics: " + metrics + "}\n");
  TrainOptions o;
  o.config = cfg, o.steps = 2, o.checkpoint = d.file("ck.safetensors"), o.eval = false;
  ::testing::internal::CaptureStdout();
  ASSERT_EQ(run_train(o), 0);
  // A later run reached step 4 and was killed mid-record; its checkpoint write never happened.
  std::ofstream(metrics, std::ios::app) << "{\"step\":3,\"loss\":1.0}\n{\"step\":4,\"loss\":1.0}\n{\"step\":5,\"lo";
  TrainOptions r;
  r.config = cfg, r.resume = o.checkpoint, r.eval = false;
  ASSERT_EQ(run_train(r), 0);
  ::testing::internal::GetCapturedStdout();
  std::ifstream in(metrics);
  std::vector<int64_t> steps;
  for (std::string line; std::getline(in, line);) {
    const nlohmann::json j = nlohmann::json::parse(line, nullptr, false);
    ASSERT_FALSE(j.is_discarded()) << "unparseable line: " << line;
    steps.push_back(j.at("step").get<int64_t>());
    EXPECT_TRUE(j.contains("lr")) << "the fake records of the lost steps are gone: " << line;
  }
  EXPECT_EQ(steps, (std::vector<int64_t>{1, 2, 3, 4}));
  // Through a symlink the cut-back replaces the target and keeps the link.
  const std::string link = d.file("link.jsonl");
  std::filesystem::create_symlink(metrics, link);
  { MetricsLog log(link, 2); }
  EXPECT_TRUE(std::filesystem::is_symlink(link));
  std::ifstream cut(metrics);
  int lines = 0;
  for (std::string line; std::getline(cut, line);) ++lines;
  EXPECT_EQ(lines, 2) << "the target was cut back to steps 1 and 2";
}

}  // namespace
}  // namespace mnemo::test

#include "train/session/device_state.h"
#include "train/session/preflight.h"

namespace mnemo::test {
namespace {

// The pre-flight check refuses a step that does not fit the available memory, naming the plan's
// figures, the modes that would fit and a batch that would; --force (or unknown memory) skips it.
TEST(Train, PreflightRefusesAStepThatDoesNotFit) {
  const Config c = load_config(std::string(MNEMO_SOURCE_DIR) + "/configs/resnet56-cifar.yaml");
  const Pipeline p = build_pipeline(c, static_data_shape(c), c.data.batch);
  std::unique_ptr<Device> dev = open_device("cpu");
  const MirrorResult share = plan_pipeline(c, p, "share", dev.get());
  const MirrorResult sub = plan_pipeline(c, p, "sublinear", dev.get());
  // Room for sublinear's step but not share's.
  const MemoryAvailable avail{(share.planned.report.total_bytes + sub.planned.report.total_bytes) / 2, "a test"};
  const std::string e = error_of([&] { check_fits(share, 0, avail, c, p, *dev, false); });
  EXPECT_NE(e.find("the planned step does not fit: mode share needs"), std::string::npos) << e;
  EXPECT_NE(e.find("is available (a test)"), std::string::npos) << e;
  EXPECT_NE(e.find("Memory modes that fit: sublinear"), std::string::npos) << e;
  EXPECT_NE(e.find("a batch of about"), std::string::npos) << e;
  EXPECT_NE(e.find("Use --force"), std::string::npos) << e;
  EXPECT_NO_THROW(check_fits(share, 0, avail, c, p, *dev, true)) << "--force";
  EXPECT_NO_THROW(check_fits(sub, 0, avail, c, p, *dev, false));
  EXPECT_NO_THROW(check_fits(share, 0, MemoryAvailable{}, c, p, *dev, false)) << "unknown: not checked";
  EXPECT_GT(host_memory_available().bytes, 0) << "MemAvailable is readable here";
}

}  // namespace
}  // namespace mnemo::test
