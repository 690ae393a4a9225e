// mnemo against PyTorch: the golden fixtures in tests/fixtures/ (tools/make_fixtures.py, see
// docs/FORMATS.md) hold the initial parameters, one batch, and what PyTorch computed from them in
// float32: the loss, the gradient of every trainable parameter, the losses of 10 SGD steps (lr 0.05,
// momentum 0.9, weight decay 1e-4, same batch) and the BatchNorm running statistics after them.
// Here the same models are built with mnemo (build_resnet, build_lstm_model, and the zoo's small
// DenseNet and one-block Inception-v3 networks), differentiated with
// plain backprop (empty mirror plan, separate memory plan) for the gradients, trained with the SGD
// update inside the step (autograd/update.h) for the 10 losses, and compared.
// Metric, per tensor: max_i |mnemo_i - torch_i| / max(max_i |torch_i|, 1e-6) (the error relative to
// the tensor's largest magnitude, so tiny entries of a gradient do not dominate); each of the 10
// losses is compared the same way as a rank-0 tensor. Tolerance 1e-4 for all of them.
#include <cmath>
#include <cstdio>
#include <set>

#include "autograd/gradient.h"
#include "autograd/update.h"
#include "core/memory_plan.h"
#include "models/lstm.h"
#include "models/resnet.h"
#include "models/zoo.h"
#include "test_util.h"
#include "train/session/param_store.h"
#include "train/session/safetensors.h"
#include "train/session/sgd.h"

namespace mnemo::test {
namespace {

constexpr double kTolerance = 1e-4;
constexpr int kSteps = 10;
const SgdOptions kSgd{0.05, 0.9, 1e-4};

std::string fixture(const std::string& name) { return std::string(MNEMO_FIXTURE_DIR) + "/" + name; }

double norm_rel(const Tensor& got, const Tensor& want) { return norm_rel_diff(got, want); }

const Tensor& find(const TensorFile& f, const std::string& name, const std::string& file) {
  auto it = f.tensors.find(name);
  if (it == f.tensors.end()) throw Error("fixture " + file + " has no tensor '" + name + "'");
  return it->second;
}

struct Worst {  // the largest error of one kind, and where
  double err = 0;
  std::string where;
  void add(double e, const std::string& w) {
    if (e > err || where.empty()) err = e, where = w;
  }
};

// Loads <tag>_*.safetensors, trains `m` for 10 steps from the fixture's initial values and compares.
void match_pytorch(BuiltModel& m, const std::string& tag) {
  const TensorFile init = read_safetensors(fixture(tag + "_init.safetensors"));
  const TensorFile batch = read_safetensors(fixture(tag + "_batch.safetensors"));
  const TensorFile expected = read_safetensors(fixture(tag + "_expected.safetensors"));

  const Graph& fwd = m.builder.graph();
  const TrainingGraph tg = build_training_graph(fwd, m.loss, {});  // gradients as outputs
  TrainingGraph step = tg;                                          // the training step, SGD inside
  add_sgd_updates(step, {kSgd.momentum, kSgd.weight_decay});
  // Two stores from the fixture's values: one for the gradient run, one trained (each run also
  // updates its BatchNorm running statistics).
  ParamStore params(fwd, m.builder.params(), 1), grad_params(fwd, m.builder.params(), 1);
  std::set<std::string> names;
  for (const ParamSpec& s : params.specs()) {
    names.insert(s.name);
    const Tensor& v = find(init, s.name, tag + "_init");
    for (ParamStore* store : {&params, &grad_params}) {
      Tensor& p = store->at(s.name);
      ASSERT_EQ(v.type(), p.type()) << s.name;
      std::memcpy(p.data(), v.data(), p.bytes());
    }
  }
  for (const auto& [name, t] : init.tensors) EXPECT_TRUE(names.count(name)) << "fixture parameter '" << name << "' is not in the mnemo model";

  const Tensor& data = find(batch, "data", tag + "_batch");
  const Tensor& labels = find(batch, "labels", tag + "_batch");
  Executor ex(tg.graph, plan_separate(tg.graph));
  grad_params.bind(ex);
  ex.bind(m.data, data.view());
  ex.bind(m.labels, labels.view());
  Sgd sgd(params, kSgd);
  Tensor lr(DType::f32, {1});
  lr.as<float>()[0] = static_cast<float>(kSgd.lr);
  Executor train(step.graph, plan_separate(step.graph));
  params.bind(train);
  size_t k = 0;
  for (const ParamSpec& s : params.specs())
    if (s.trainable) train.bind("velocity/" + s.name, sgd.state().at(k++).view());
  train.bind(step.lr, lr.view());
  train.bind(m.data, data.view());
  train.bind(m.labels, labels.view());
  const Tensor& want_losses = find(expected, "losses_10", tag + "_expected");
  ASSERT_EQ(want_losses.type(), (TensorType{DType::f64, {kSteps}}));

  Worst loss_err, grad_err, steps_err, running_err;
  for (int step_no = 0; step_no < kSteps; ++step_no) {
    Tensor loss(DType::f64, {});
    if (step_no == 0) {
      ex.run();
      loss.as<double>()[0] = ex.entry(tg.loss).as<float>()[0];
      loss_err.add(norm_rel(loss, find(expected, "loss", tag + "_expected")), "loss");
      int trainable = 0;
      for (const ParamGrad& pg : tg.grads) {
        const std::string& name = tg.graph.node(pg.param).name;
        Tensor g(ex.entry(pg.grad).type);
        std::memcpy(g.data(), ex.entry(pg.grad).data, g.bytes());
        const double e = norm_rel(g, find(expected, "grad/" + name, tag + "_expected"));
        EXPECT_LE(e, kTolerance) << tag << ": gradient of " << name;
        grad_err.add(e, name);
        ++trainable;
      }
      int in_fixture = 0;
      for (const auto& [name, t] : expected.tensors) in_fixture += name.rfind("grad/", 0) == 0;
      EXPECT_EQ(trainable, in_fixture) << tag << ": trainable parameters in mnemo vs gradients in the fixture";
    }
    train.run();
    ASSERT_EQ(train.fetch(step.status).as<int32_t>()[0], 0) << tag << ": step " << step_no + 1 << " reports a non-finite value";
    loss.as<double>()[0] = train.entry(step.loss).as<float>()[0];
    Tensor want(DType::f64, {});
    want.as<double>()[0] = want_losses.as<double>()[step_no];
    const double e = norm_rel(loss, want);
    EXPECT_LE(e, kTolerance) << tag << ": loss of step " << step_no + 1 << ": mnemo " << get(loss, 0) << ", torch "
                             << get(want, 0);
    steps_err.add(e, "step " + std::to_string(step_no + 1));
  }
  EXPECT_LE(loss_err.err, kTolerance) << tag << ": loss";
  for (const ParamSpec& s : params.specs()) {
    if (s.trainable) continue;
    const double e = norm_rel(params.at(s.name), find(expected, "running/" + s.name, tag + "_expected"));
    EXPECT_LE(e, kTolerance) << tag << ": " << s.name << " after " << kSteps << " steps";
    running_err.add(e, s.name);
  }
  std::printf("[ pytorch  ] %s: max norm-relative error: loss %.2e, gradients %.2e (%s), %d step losses %.2e (%s)",
              tag.c_str(), loss_err.err, grad_err.err, grad_err.where.c_str(), kSteps, steps_err.err,
              steps_err.where.c_str());
  if (!running_err.where.empty())
    std::printf(", running stats %.2e (%s)", running_err.err, running_err.where.c_str());
  std::printf("\n");
}

TEST(PytorchMatch, CifarResNet8) {
  ResNetConfig c;
  c.style = "cifar";
  c.depth = 8;
  c.batch = 4, c.channels = 3, c.height = 8, c.width = 8, c.classes = 5;
  c.width_base = 4;
  BuiltModel m = build_resnet(c);
  match_pytorch(m, "resnet");
}

// The LSTM of the "lstm" fixture: 2 layers of 6, 3 steps, batch 4, input 5, 7 classes at every step.
LstmConfig fixture_lstm() {
  LstmConfig c;
  c.steps = 3, c.batch = 4, c.input = 5, c.hidden = 6, c.layers = 2, c.classes = 7;
  c.per_step = true;
  return c;
}

TEST(PytorchMatch, Lstm2Layers3StepsPerStepLoss) {
  BuiltModel m = build_lstm_model(fixture_lstm());
  match_pytorch(m, "lstm");
}

// The same fixture with each step's tail as one lstm_cell node (model.cell: fused).
TEST(PytorchMatch, Lstm2Layers3StepsFusedCell) {
  LstmConfig c = fixture_lstm();
  c.fused_cell = true;
  BuiltModel m = build_lstm_model(c);
  EXPECT_EQ(count_ops(m.builder.graph(), "lstm_cell"), 6);
  match_pytorch(m, "lstm");
}

// The same fixture with every step's classifier and loss as one linear_cross_entropy node whose
// gradient is made in the forward pass (model.head: fused): the same loss, gradients and steps.
TEST(PytorchMatch, Lstm2Layers3StepsFusedHead) {
  LstmConfig c = fixture_lstm();
  c.fused_head = true;
  BuiltModel m = build_lstm_model(c);
  EXPECT_EQ(count_ops(m.builder.graph(), "linear_cross_entropy"), 1);
  EXPECT_EQ(count_ops(m.builder.graph(), "fully_connected"), 2 * 3 + 2 * 2);  // the gates' products only
  EXPECT_TRUE(m.all_logits.empty());
  match_pytorch(m, "lstm");
}

// The fused head against the per-step classifiers in float64, with logits over several chunks of
// linear_cross_entropy (20000 classes: 26 rows a chunk, 64 rows): the loss and every gradient
// within 1e-12 (different summation orders only). The evaluation graph keeps the classifiers.
TEST(FusedHead, MatchesPerStepClassifiersInFloat64) {
  LstmConfig c;
  c.steps = 4, c.batch = 16, c.input = 3, c.hidden = 4, c.layers = 1, c.classes = 20000;
  c.per_step = true;
  c.dtype = DType::f64;
  std::vector<std::vector<Tensor>> results;
  for (bool fused : {false, true}) {
    c.fused_head = fused;
    BuiltModel m = build_lstm_model(c);
    const Graph& fwd = m.builder.graph();
    const TrainingGraph tg = build_training_graph(fwd, m.loss, {});
    ParamStore params(fwd, m.builder.params(), 5);
    Tensor data(DType::f64, {c.steps, c.batch, c.input}), labels(DType::i32, {c.steps, c.batch});
    fill_distinct(data, 11);
    fill_ints(labels, 12, c.classes);
    Executor ex(tg.graph, plan_separate(tg.graph));
    params.bind(ex);
    ex.bind(m.data, data.view());
    ex.bind(m.labels, labels.view());
    ex.run();
    std::vector<Tensor> out;
    out.push_back(ex.fetch(tg.loss));
    for (const ParamGrad& pg : tg.grads) out.push_back(ex.fetch(pg.grad));
    results.push_back(std::move(out));
  }
  ASSERT_EQ(results[0].size(), results[1].size());
  for (size_t k = 0; k < results[0].size(); ++k) {
    const double e = norm_rel(results[1][k], results[0][k]);
    EXPECT_LE(e, 1e-12) << "output " << k;
    EXPECT_FALSE(std::isnan(e)) << "output " << k;
  }
  c.training = false;
  EXPECT_EQ(build_lstm_model(c).all_logits.size(), static_cast<size_t>(c.steps));
}

// torchvision's DenseNet(growth 4, blocks (2, 2), init 8, bn_size 2): dense concatenations,
// transitions with average pooling, parameter names mapped from torchvision's.
TEST(PytorchMatch, SmallDenseNet) {
  ZooConfig c;
  c.arch = "densenet", c.blocks = {2, 2}, c.growth = 4, c.init_features = 8, c.bn_size = 2;
  c.batch = 4, c.channels = 3, c.height = 16, c.width = 16, c.classes = 5;
  BuiltModel m = build_zoo_model(c);
  match_pytorch(m, "densenet");
}

// One Inception-v3 block of each kind torchvision has small enough for a fixture: A (5x5 and the
// average-pool branch, count_include_pad), B (stride-2 branches and max pool), C (factorised 1x7 /
// 7x1 convolutions).
TEST(PytorchMatch, InceptionBlocks) {
  for (char kind : {'A', 'B', 'C'}) {
    SCOPED_TRACE(std::string("Inception") + kind);
    BuiltModel m = build_inception_block_net(kind, 3, 9, 8, 4, 5);
    match_pytorch(m, std::string("inception_") + static_cast<char>(kind - 'A' + 'a'));
  }
}

}  // namespace
}  // namespace mnemo::test
