// Small reference networks (see small_nets.h).
#include "models/small_nets.h"

#include "models/lstm.h"

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
  BuiltModel b = build_lstm_model({t_steps, n, d, hidden, layers, classes, true, dtype});
  return Model{std::move(b.builder), b.loss, b.logits};
}

}  // namespace mnemo
