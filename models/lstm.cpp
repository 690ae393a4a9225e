// LSTM builder (see lstm.h).
#include "models/lstm.h"

#include <cmath>

namespace mnemo {

BuiltModel build_lstm_model(const LstmConfig& c) {
  MNEMO_CHECK(c.steps >= 1 && c.batch >= 1 && c.input >= 1 && c.hidden >= 1 && c.layers >= 1)
      << "lstm: steps, batch, input, hidden and layers must be positive";
  MNEMO_CHECK(c.classes >= 2) << "model.classes must be at least 2, got " << c.classes;
  BuiltModel m{ModelBuilder(c.dtype)};
  ModelBuilder& b = m.builder;
  const int64_t n = c.batch, H = c.hidden;
  EntryRef x = b.input("data", {c.steps, n, c.input}, c.dtype);
  EntryRef labels = c.per_step ? b.input("labels", {c.steps, n}, DType::i32) : b.input("labels", {n}, DType::i32);

  // Parameters first (names and order are the checkpoint layout), then the unrolled steps in
  // step-major order: all layers of step t, then step t+1 (each input slice made right before its
  // first use). A step boundary is then crossed only by {h, c} of every layer, which keeps live
  // memory low and gives the mirror planners small cuts.
  const double bound = 1.0 / std::sqrt(static_cast<double>(H));
  struct Layer {
    EntryRef wx, wh, bias, h, c;
  };
  std::vector<Layer> layer(c.layers);
  for (int64_t l = 0; l < c.layers; ++l) {
    const std::string L = "lstm" + std::to_string(l);
    const int64_t in_dim = l == 0 ? c.input : H;
    layer[l].wx = b.param(L + "/wx", {4 * H, in_dim}, {ParamInit::uniform, bound});
    layer[l].wh = b.param(L + "/wh", {4 * H, H}, {ParamInit::uniform, bound});
    layer[l].bias = b.param(L + "/bias", {4 * H}, {ParamInit::uniform, bound});
  }
  EntryRef wy = b.param("classifier/weight", {c.classes, H}, {ParamInit::uniform, bound});
  EntryRef by = b.param("classifier/bias", {c.classes}, {ParamInit::uniform, bound});
  // The fused head (model.head: fused) in training graphs: the top layer's outputs of every step
  // (or the last step's) stacked in step order, and the labels as one column. Each step's output
  // is written into the stack as soon as it is made (stack_rows, in place on one buffer): a concat
  // at the end would keep all of them alive to the end of the forward pass, across every cut of
  // the mirror planners.
  const bool fused = c.fused_head && c.training;
  m.head = c.fused_head ? "fused" : "ops";
  std::vector<EntryRef> losses;
  EntryRef stack;
  for (int64_t t = 0; t < c.steps; ++t) {
    const std::string in = "input/step" + std::to_string(t);
    EntryRef xt = b.op("slice", {x}, {{"axis", int64_t{0}}, {"begin", t}, {"end", t + 1}}, in + "/slice");
    EntryRef h_in = b.op("reshape", {xt}, {{"shape", std::vector<int64_t>{n, c.input}}}, in);
    for (int64_t l = 0; l < c.layers; ++l) {
      Layer& ly = layer[l];
      const std::string s = "lstm" + std::to_string(l) + "/step" + std::to_string(t);
      EntryRef gates = b.op("fully_connected", {h_in, ly.wx, ly.bias}, {}, s + "/gates_x");
      if (c.fused_cell) {  // one lstm_cell node: the gates' sum and the elementwise tail
        std::vector<EntryRef> in{gates};
        if (t > 0) in = {gates, ly.c, b.op("fully_connected", {ly.h, ly.wh}, {}, s + "/gates_h")};
        auto out = b.op_n("lstm_cell", in, {}, s + "/cell");
        ly.h = out[0], ly.c = out[1];
        h_in = ly.h;
        continue;
      }
      if (t > 0) gates = b.op("add", {gates, b.op("fully_connected", {ly.h, ly.wh}, {}, s + "/gates_h")}, {}, s + "/gates");
      auto parts = b.op_n("split", {gates}, {{"axis", int64_t{1}}, {"parts", int64_t{4}}}, s + "/split");
      EntryRef i = b.op("sigmoid", {parts[0]}, {}, s + "/i");
      EntryRef f = b.op("sigmoid", {parts[1]}, {}, s + "/f");
      EntryRef g = b.op("tanh", {parts[2]}, {}, s + "/g");
      EntryRef o = b.op("sigmoid", {parts[3]}, {}, s + "/o");
      EntryRef ig = b.op("mul", {i, g}, {}, s + "/ig");
      ly.c = t > 0 ? b.op("add", {b.op("mul", {f, ly.c}, {}, s + "/fc"), ig}, {}, s + "/c") : ig;
      ly.h = b.op("mul", {o, b.op("tanh", {ly.c}, {}, s + "/tanh_c")}, {}, s + "/h");
      h_in = ly.h;
    }
    if (c.per_step && fused) {
      if (!stack.valid())
        stack = b.op("constant", {}, {{"shape", std::vector<int64_t>{c.steps * n, H}}, {"dtype", std::string(dtype_name(c.dtype))},
                                      {"value", 0.0}}, "classifier/inputs");
      stack = b.op("stack_rows", {stack, h_in}, {{"begin", t * n}}, "classifier/inputs/step" + std::to_string(t));
    } else if (c.per_step) {
      const std::string s = "classifier/step" + std::to_string(t);
      m.logits = b.op("fully_connected", {h_in, wy, by}, {}, s);
      m.all_logits.push_back(m.logits);
      EntryRef yt = b.op("slice", {labels}, {{"axis", int64_t{0}}, {"begin", t}, {"end", t + 1}}, s + "/labels_slice");
      yt = b.op("reshape", {yt}, {{"shape", std::vector<int64_t>{n}}}, s + "/labels");
      losses.push_back(b.op("softmax_cross_entropy", {m.logits, yt}, {}, s + "/loss"));
    }
  }
  if (fused) {
    EntryRef x_all = c.per_step ? stack : layer.back().h;
    const int64_t rows = (c.per_step ? c.steps : 1) * n;
    EntryRef y_all = c.per_step ? b.op("reshape", {labels}, {{"shape", std::vector<int64_t>{rows}}}, "classifier/labels") : labels;
    // The mean over every step's rows: the per-step classifiers' (1/T) sum_t mean_n, the same loss.
    m.loss = b.op_n("linear_cross_entropy", {x_all, wy, by, y_all}, {}, "classifier/loss")[0];
    m.layers = static_cast<int>(c.layers * c.steps + 1);
    return m;
  }
  if (!c.per_step) {
    m.logits = b.op("fully_connected", {layer.back().h, wy, by}, {}, "classifier");
    m.loss = b.op("softmax_cross_entropy", {m.logits, labels}, {}, "loss");
    m.all_logits = {m.logits};
    m.layers = static_cast<int>(c.layers * c.steps + 1);
    return m;
  }
  EntryRef sum = losses.size() == 1 ? losses[0] : b.op("add_n", losses, {}, "loss_sum");
  EntryRef scale = b.op("constant", {}, {{"shape", std::vector<int64_t>{}}, {"dtype", std::string(dtype_name(c.dtype))},
                                          {"value", 1.0 / static_cast<double>(c.steps)}}, "loss_scale");
  m.loss = b.op("mul", {sum, scale}, {}, "loss");
  m.layers = static_cast<int>(c.layers * c.steps + 1);
  return m;
}

}  // namespace mnemo
