// The models of the mirror-planner tests (tests/mirror_models.h).
#include "mirror_models.h"

#include "core/comm.h"
#include "train/session/param_store.h"
#include "train/session/sgd.h"

namespace mnemo::test {

Config small_resnet() {
  return parse_config("model: {type: resnet, style: cifar, depth: 14, width: 4}\n"
                      "data: {source: synthetic, shape: [3, 8, 8], classes: 3, batch: 4}\n"
                      "train: {steps: 1}\n", "resnet14.yaml");
}
Config small_lstm() {
  return parse_config("model: {type: lstm, layers: 2, hidden: 8, per_step: true, head: ops}\n"
                      "data: {source: synthetic-seq, shape: [12, 5], classes: 6, batch: 3}\n"
                      "train: {steps: 1}\n", "lstm.yaml");
}
Config small_lstm_fused() {
  return parse_config("model: {type: lstm, layers: 2, hidden: 8, per_step: true, cell: fused, head: ops}\n"
                      "data: {source: synthetic-seq, shape: [12, 5], classes: 6, batch: 3}\n"
                      "train: {steps: 1}\n", "lstm-fused.yaml");
}
Config small_lstm_fused_head() {
  return parse_config("model: {type: lstm, layers: 2, hidden: 8, per_step: true, head: fused}\n"
                      "data: {source: synthetic-seq, shape: [12, 5], classes: 6, batch: 3}\n"
                      "train: {steps: 1}\n", "lstm-fused-head.yaml");
}
namespace {
Config graph_config() { return load_config(MNEMO_SOURCE_DIR "/configs/mlp-graph.yaml"); }
// Zoo models at small inputs: depthwise convolutions, relu6 and inverted residuals; dense
// concatenations; Inception's branches and factorised kernels.
Config zoo(const std::string& model, const std::string& shape, int batch) {
  return parse_config("model: " + model + "\ndata: {source: synthetic, shape: " + shape + ", classes: 4, batch: " +
                          std::to_string(batch) + "}\ntrain: {steps: 1}\n",
                      "zoo.yaml");
}
}  // namespace
const std::vector<std::string> kModels = {"resnet", "lstm", "graph", "mobilenet_v2", "densenet121", "inception_v3", "darts",
                                          "amoebanet", "lstm_fused", "resnet_blocked", "lstm_fused_head"};
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
    case 10: return small_lstm_fused_head();
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

}  // namespace mnemo::test
