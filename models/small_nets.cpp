// Small reference networks (see small_nets.h).
#include "models/small_nets.h"

#include <cmath>

namespace mnemo {

Model build_mlp(int64_t n, int64_t d, int64_t h, int64_t c, DType dtype) {
  Model m{ModelBuilder(dtype), {}, {}};
  ModelBuilder& b = m.builder;
  EntryRef x = b.input("data", {n, d}, dtype);
  EntryRef y = b.input("labels", {n}, DType::i32);
  EntryRef h1 = b.op("tanh", {b.fully_connected(x, "fc1", h)}, {}, "act1");
  EntryRef h2 = b.op("sigmoid", {b.fully_connected(h1, "fc2", h)}, {}, "act2");
  m.logits = b.fully_connected(h2, "fc3", c);
  m.loss = b.op("softmax_cross_entropy", {m.logits, y}, {}, "loss");
  return m;
}

Model build_small_cnn(int64_t n, int64_t s, int64_t c, int64_t classes, DType dtype) {
  Model m{ModelBuilder(dtype), {}, {}};
  ModelBuilder& b = m.builder;
  EntryRef x = b.input("data", {n, 3, s, s}, dtype);
  EntryRef y = b.input("labels", {n}, DType::i32);
  EntryRef h = b.relu(b.batch_norm(b.conv2d(x, "conv1", c, 3, 1, 1), "bn1"), "relu1");
  EntryRef r = b.relu(b.batch_norm(b.conv2d(h, "block/conv1", c, 3, 1, 1), "block/bn1"), "block/relu1");
  r = b.batch_norm(b.conv2d(r, "block/conv2", c, 3, 1, 1), "block/bn2");
  h = b.relu(b.op("add", {r, h}, {}, "block/sum"), "block/relu2");
  h = b.op("max_pool2d", {h}, {{"kernel", int64_t{2}}}, "pool1");
  h = b.relu(b.batch_norm(b.conv2d(h, "conv2", 2 * c, 3, 2, 1), "bn2"), "relu2");
  h = b.op("avg_pool2d", {h}, {{"kernel", int64_t{2}}}, "pool2");
  h = b.op("global_avg_pool", {h}, {}, "gap");
  m.logits = b.fully_connected(h, "fc", classes);
  m.loss = b.op("softmax_cross_entropy", {m.logits, y}, {}, "loss");
  return m;
}

Model build_lstm(int64_t t_steps, int64_t n, int64_t d, int64_t hidden, int64_t layers, int64_t classes,
                 DType dtype) {
  Model m{ModelBuilder(dtype), {}, {}};
  ModelBuilder& b = m.builder;
  Graph& g = b.graph();
  EntryRef x = b.input("data", {t_steps, n, d}, dtype);
  EntryRef labels = b.input("labels", {t_steps, n}, DType::i32);

  // Per-step inputs: slice step t out of data and drop the leading 1.
  std::vector<EntryRef> seq;
  for (int64_t t = 0; t < t_steps; ++t) {
    const std::string s = "step" + std::to_string(t);
    EntryRef xt = b.op("slice", {x}, {{"axis", int64_t{0}}, {"begin", t}, {"end", t + 1}}, s + "/x_slice");
    seq.push_back(b.op("reshape", {xt}, {{"shape", std::vector<int64_t>{n, d}}}, s + "/x"));
  }
  for (int64_t l = 0; l < layers; ++l) {
    const std::string L = "lstm" + std::to_string(l);
    const int64_t in_dim = g.type(seq[0]).shape[1];
    const double bound = 1.0 / std::sqrt(static_cast<double>(hidden));
    EntryRef wx = b.param(L + "/wx", {4 * hidden, in_dim}, {ParamInit::uniform, bound});
    EntryRef wh = b.param(L + "/wh", {4 * hidden, hidden}, {ParamInit::uniform, bound});
    EntryRef bias = b.param(L + "/bias", {4 * hidden}, {ParamInit::uniform, bound});
    EntryRef h, c;
    for (int64_t t = 0; t < t_steps; ++t) {
      const std::string s = L + "/step" + std::to_string(t);
      EntryRef gates = b.op("fully_connected", {seq[t], wx, bias}, {}, s + "/gates_x");
      if (t > 0) gates = b.op("add", {gates, b.op("fully_connected", {h, wh}, {}, s + "/gates_h")}, {}, s + "/gates");
      auto parts = b.op_n("split", {gates}, {{"axis", int64_t{1}}, {"parts", int64_t{4}}}, s + "/split");
      EntryRef i = b.op("sigmoid", {parts[0]}, {}, s + "/i");
      EntryRef f = b.op("sigmoid", {parts[1]}, {}, s + "/f");
      EntryRef gg = b.op("tanh", {parts[2]}, {}, s + "/g");
      EntryRef o = b.op("sigmoid", {parts[3]}, {}, s + "/o");
      EntryRef ig = b.op("mul", {i, gg}, {}, s + "/ig");
      c = t > 0 ? b.op("add", {b.op("mul", {f, c}, {}, s + "/fc"), ig}, {}, s + "/c") : ig;
      h = b.op("mul", {o, b.op("tanh", {c}, {}, s + "/tanh_c")}, {}, s + "/h");
      seq[t] = h;
    }
  }
  std::vector<EntryRef> losses;
  const double bound = 1.0 / std::sqrt(static_cast<double>(hidden));
  EntryRef wy = b.param("classifier/weight", {classes, hidden}, {ParamInit::uniform, bound});
  EntryRef by = b.param("classifier/bias", {classes}, {ParamInit::uniform, bound});
  for (int64_t t = 0; t < t_steps; ++t) {
    const std::string s = "out/step" + std::to_string(t);
    m.logits = b.op("fully_connected", {seq[t], wy, by}, {}, s + "/logits");
    EntryRef yt = b.op("slice", {labels}, {{"axis", int64_t{0}}, {"begin", t}, {"end", t + 1}}, s + "/labels_slice");
    yt = b.op("reshape", {yt}, {{"shape", std::vector<int64_t>{n}}}, s + "/labels");
    losses.push_back(b.op("softmax_cross_entropy", {m.logits, yt}, {}, s + "/loss"));
  }
  m.loss = losses.size() == 1 ? losses[0] : b.op("add_n", losses, {}, "loss");
  return m;
}

}  // namespace mnemo
