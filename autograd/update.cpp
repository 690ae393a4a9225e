// The optimiser update pass (see update.h).
#include "autograd/update.h"

#include <algorithm>

namespace mnemo {

void add_sgd_updates(TrainingGraph& tg, const SgdSpec& spec) {
  MNEMO_ASSERT(tg.lr < 0) << "add_sgd_updates: the graph has updates already";
  MNEMO_ASSERT(tg.loss.valid()) << "add_sgd_updates: a training graph with a loss is needed";
  const Graph& old = tg.graph;
  const int n = static_cast<int>(old.size());
  const int forward_end = tg.num_forward - 1;  // the loss check goes right after the forward nodes
  // The node whose memory each node's output 0 is (views resolve to what they alias), and the last
  // node reading that memory.
  std::vector<int> root(n), last_read(n, -1);
  for (int v = 0; v < n; ++v) root[v] = old.node(v).is(OpKind::view) ? root[old.node(v).inputs[0].node] : v;
  for (int v = 0; v < n; ++v)
    for (const EntryRef& e : old.node(v).inputs) last_read[root[e.node]] = std::max(last_read[root[e.node]], v);
  // Update k runs right after pos[k]: the last reader of its parameter, its gradient's producer and
  // the last reader of its gradient's memory (all after the loss check).
  std::vector<int> pos(tg.grads.size());
  for (size_t k = 0; k < tg.grads.size(); ++k) {
    const ParamGrad& pg = tg.grads[k];
    pos[k] = std::max({forward_end, last_read[pg.param], pg.grad.node, last_read[root[pg.grad.node]]});
  }
  std::vector<std::vector<int>> after(n);  // node -> updates placed right after it, in grads order
  for (size_t k = 0; k < tg.grads.size(); ++k) after[pos[k]].push_back(static_cast<int>(k));

  TrainingGraph out;
  Graph& g = out.graph;
  std::vector<int> new_id(n, -1);
  auto remap = [&](EntryRef e) { return EntryRef{new_id[e.node], e.index}; };
  EntryRef lr, status;
  std::vector<int> velocity(tg.grads.size(), -1);
  for (int v = 0; v < n; ++v) {
    Node node = old.node(v);
    for (EntryRef& e : node.inputs) e = remap(e);
    new_id[v] = g.push(std::move(node));
    if (v == forward_end) {
      lr = g.input("optimizer/lr", TensorType{DType::f32, {1}});
      for (size_t k = 0; k < tg.grads.size(); ++k) {
        const Node& p = old.node(tg.grads[k].param);
        velocity[k] = g.param("velocity/" + p.name, p.outputs[0], false).node;
      }
      status = g.add1("finite_check", {remap(tg.loss)}, {}, "optimizer/loss_check");
      g.node(status.node).role = NodeRole::backward;
      g.node(status.node).source = tg.loss.node;
    }
    for (int k : after[v]) {
      const ParamGrad& pg = tg.grads[k];
      const std::string& name = old.node(pg.param).name;
      const int u = g.add("sgd_update", {remap({pg.param, 0}), remap(pg.grad), {velocity[k], 0}, lr, status},
                          {{"momentum", spec.momentum}, {"weight_decay", spec.weight_decay}, {"index", int64_t{k + 1}}},
                          name + "/update");
      g.node(u).role = NodeRole::backward;
      g.node(u).source = pg.param;
      status = {u, 2};
    }
  }
  out.num_forward = tg.num_forward;
  out.loss = remap(tg.loss);
  for (const ParamGrad& pg : tg.grads) out.grads.push_back({new_id[pg.param], remap(pg.grad)});
  for (const EntryRef& e : old.outputs) {
    const bool is_grad = std::any_of(tg.grads.begin(), tg.grads.end(), [&](const ParamGrad& pg) { return pg.grad == e; });
    if (!is_grad) g.outputs.push_back(remap(e));  // a gradient dies at its update
  }
  g.outputs.push_back(status);
  for (StateUpdate u : old.state_updates) g.state_updates.push_back({new_id[u.param], remap(u.value)});
  out.lr = lr.node;
  out.optimizer_state = velocity;
  out.status = status;
  tg = std::move(out);
}

}  // namespace mnemo
