// ModelBuilder layer helpers.
#include "models/builder.h"

#include <cmath>

namespace mnemo {

EntryRef ModelBuilder::input(const std::string& name, Shape shape, DType dtype) {
  return g_.input(name, {dtype, std::move(shape)});
}

EntryRef ModelBuilder::param(const std::string& name, Shape shape, ParamInit init, bool trainable) {
  EntryRef p = g_.param(name, {dtype_, std::move(shape)}, trainable);
  params_.push_back({name, p.node, init, trainable});
  return p;
}

namespace {
// x's channels: [N,C,H,W], or with `block` channel-blocked [N,C/b,H,W,b].
int64_t channels_of(const TensorType& t, int64_t block, const std::string& name, const char* op) {
  if (!block) return t.shape.size() >= 2 ? t.shape[1] : 0;
  MNEMO_CHECK(t.shape.size() == 5 && t.shape[4] == block)
      << name << ": " << op << " with block " << block << " expects channel-blocked [N,C/" << block << ",H,W," << block
      << "], got " << t.str();
  return t.shape[1] * block;
}
}  // namespace

EntryRef ModelBuilder::conv2d(EntryRef x, const std::string& name, int64_t out_channels, int64_t kernel,
                              int64_t stride, int64_t padding, int64_t block) {
  const TensorType& t = g_.type(x);
  MNEMO_CHECK(block || t.shape.size() == 4) << name << ": conv2d expects [N,C,H,W], got " << t.str();
  const int64_t c = channels_of(t, block, name, "conv2d");
  const double fan_in = static_cast<double>(c * kernel * kernel);
  EntryRef w = param(name + "/weight", {out_channels, c, kernel, kernel}, {ParamInit::normal, std::sqrt(2.0 / fan_in)});
  Attrs a{{"stride", stride}, {"padding", padding}};
  if (block) a["block"] = block;
  return g_.add1("conv2d", {x, w}, std::move(a), name);
}

EntryRef ModelBuilder::batch_norm(EntryRef x, const std::string& name, double momentum, double eps, int64_t block) {
  const TensorType& t = g_.type(x);
  MNEMO_CHECK(t.shape.size() >= 2) << name << ": batch_norm expects [N,C,...], got " << t.str();
  const int64_t c = channels_of(t, block, name, "batch_norm");
  const int64_t count = t.numel() / c;
  EntryRef gamma = param(name + "/gamma", {c}, {ParamInit::ones, 0});
  EntryRef beta = param(name + "/beta", {c}, {ParamInit::zeros, 0});
  EntryRef rmean = param(name + "/running_mean", {c}, {ParamInit::zeros, 0}, false);
  EntryRef rvar = param(name + "/running_var", {c}, {ParamInit::ones, 0}, false);
  Attrs a{{"eps", eps}, {"training", training_}};
  if (block) a["block"] = block;
  if (!training_) return g_.add1("batch_norm", {x, gamma, beta, rmean, rvar}, std::move(a), name);
  const int bn = g_.add("batch_norm", {x, gamma, beta}, std::move(a), name);
  const int st = g_.add("batch_norm_stats", {rmean, rvar, {bn, 1}, {bn, 2}},
                        {{"momentum", momentum}, {"eps", eps}, {"count", count}}, name + "/stats");
  g_.state_updates.push_back({rmean.node, {st, 0}});
  g_.state_updates.push_back({rvar.node, {st, 1}});
  return {bn, 0};
}

EntryRef ModelBuilder::relu(EntryRef x, const std::string& name) { return g_.add1("relu", {x}, {}, name); }

EntryRef ModelBuilder::dropout(EntryRef x, const std::string& name, double p) {
  if (!training_ || p == 0) return x;
  int step = g_.find(kRngStep);
  if (step < 0) step = g_.input(kRngStep, {DType::i32, {1}}).node;
  uint64_t h = 1469598103934665603ull;  // FNV-1a of the name: a seed that does not depend on build order
  for (unsigned char ch : name) h = (h ^ ch) * 1099511628211ull;
  return g_.add1("dropout", {x, {step, 0}}, {{"p", p}, {"seed", static_cast<int64_t>(h >> 2)}}, name);
}

EntryRef ModelBuilder::fully_connected(EntryRef x, const std::string& name, int64_t out, bool bias) {
  const TensorType& t = g_.type(x);
  MNEMO_CHECK(t.shape.size() == 2) << name << ": fully_connected expects [N,D], got " << t.str();
  const double bound = 1.0 / std::sqrt(static_cast<double>(t.shape[1]));
  EntryRef w = param(name + "/weight", {out, t.shape[1]}, {ParamInit::uniform, bound});
  std::vector<EntryRef> in{x, w};
  if (bias) in.push_back(param(name + "/bias", {out}, {ParamInit::uniform, bound}));
  return g_.add1("fully_connected", in, {}, name);
}

std::vector<EntryRef> ModelBuilder::op_n(const std::string& op, std::vector<EntryRef> in, Attrs attrs,
                                         const std::string& name) {
  const int id = g_.add(op, std::move(in), std::move(attrs), name);
  std::vector<EntryRef> outs;
  for (size_t j = 0; j < g_.node(id).outputs.size(); ++j) outs.push_back({id, static_cast<int>(j)});
  return outs;
}

ModelStats model_stats(const ModelBuilder& b) {
  ModelStats st;
  const Graph& g = b.graph();
  for (const ParamSpec& s : b.params())
    if (s.trainable) st.params += g.node(s.node).outputs[0].numel();
  for (int v = 0; v < static_cast<int>(g.size()); ++v) {
    const double f = node_cost(g, v).flops;
    st.forward_flops += f;
    const std::string& op = g.node(v).op->name;
    if (op == "conv2d" || op == "fully_connected") st.matmul_flops += f;
  }
  return st;
}

}  // namespace mnemo
