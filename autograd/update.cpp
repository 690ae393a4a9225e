// The optimiser update pass (see update.h).
#include "autograd/update.h"

#include "autograd/allreduce.h"

#include <algorithm>
#include <vector>

namespace mnemo {

void add_sgd_updates(TrainingGraph& tg, const SgdSpec& spec) {
  MNEMO_ASSERT(tg.lr < 0) << "add_sgd_updates: the graph has updates already";
  MNEMO_ASSERT(tg.loss.valid()) << "add_sgd_updates: a training graph with a loss is needed";
  if (spec.ranks > 1 || spec.reduce_one_rank) add_gradient_allreduce(tg, spec.ranks, spec.bucket_bytes);
  Graph& g = tg.graph;
  const int n = static_cast<int>(g.size());
  const int forward_end = tg.num_forward - 1;  // the loss check goes right after the forward nodes
  // The entry whose memory each entry is (views resolve to what they alias), and the last node
  // reading that memory (per entry: a node's other outputs do not hold an update back). Entries
  // are numbered node by node (first[v] + index); flat arrays, as this runs once per candidate
  // plan in the mirror searches.
  std::vector<int> first(static_cast<size_t>(n) + 1, 0);
  for (int v = 0; v < n; ++v) first[v + 1] = first[v] + static_cast<int>(g.node(v).outputs.size());
  auto slot = [&](EntryRef e) { return static_cast<size_t>(first[e.node] + e.index); };
  std::vector<EntryRef> root(static_cast<size_t>(first[n]));
  for (int v = 0; v < n; ++v)
    for (int j = first[v]; j < first[v + 1]; ++j) root[static_cast<size_t>(j)] = {v, j - first[v]};
  std::vector<int> last_read(static_cast<size_t>(first[n]), -1);
  for (int v = 0; v < n; ++v) {
    const Node& node = g.node(v);
    if (node.is(OpKind::view)) root[slot({v, 0})] = root[slot(node.inputs[0])];
    for (const EntryRef& e : node.inputs) {
      int& last = last_read[slot(root[slot(e)])];
      last = std::max(last, v);
    }
  }
  auto last_reader = [&](EntryRef e) { return last_read[slot(root[slot(e)])]; };
  // Update k runs right after pos[k]: the last reader of its parameter, its gradient's producer and
  // the last reader of its gradient's memory (all after the loss check).
  std::vector<int> pos(tg.grads.size());
  for (size_t k = 0; k < tg.grads.size(); ++k) {
    const ParamGrad& pg = tg.grads[k];
    pos[k] = std::max({forward_end, last_reader({pg.param, 0}), pg.grad.node, last_reader(pg.grad)});
  }
  std::vector<std::vector<int>> after(n);  // node -> updates placed right after it, in grads order
  for (size_t k = 0; k < tg.grads.size(); ++k) after[pos[k]].push_back(static_cast<int>(k));

  // The new nodes are appended to the graph, then everything is put in place at once
  // (Graph::permute: no node copied, no name hashed again).
  // The learning rate in the parameters' dtype (float64 graphs get it unrounded).
  const DType dt = tg.grads.empty() ? DType::f32 : g.type({tg.grads[0].param, 0}).dtype;
  // The optimiser's names are kept exactly (checkpoints store the velocities by name): a backward
  // node holding one is renamed name_1, name_2, ... (the first free), as when these nodes were
  // added before any backward node and a backward node of the same name came later.
  auto claim = [&](const std::string& name) {
    // (Free, or a forward node's: then the add below reports the duplicate.)
    if (!g.names_indexed()) return;  // (names unchecked: build_training_graph's index_names)
    if (const int id = g.find(name); id > forward_end) g.rename(id, g.unique_name(name));
  };
  std::vector<int> at_forward_end;  // placed right after the forward nodes
  claim("optimizer/lr");
  const EntryRef lr = g.input("optimizer/lr", TensorType{dt, {1}});
  at_forward_end.push_back(lr.node);
  std::vector<int> velocity(tg.grads.size(), -1);
  for (size_t k = 0; k < tg.grads.size(); ++k) {
    const Node& param = g.node(tg.grads[k].param);  // (a deque: adding nodes moves no other)
    const std::string name = "velocity/" + param.name;
    claim(name);
    velocity[k] = g.param(name, param.outputs[0], false).node;
    at_forward_end.push_back(velocity[k]);
  }
  claim("optimizer/loss_check");
  EntryRef status = g.add1("finite_check", {tg.loss}, {}, "optimizer/loss_check");
  g.node(status.node).role = NodeRole::backward;
  g.node(status.node).source = tg.loss.node;
  at_forward_end.push_back(status.node);
  std::vector<std::vector<int>> updates_after(n);
  for (int v = 0; v < n; ++v)
    for (int k : after[v]) {
      const ParamGrad& pg = tg.grads[k];
      const int u = g.add("sgd_update", {{pg.param, 0}, pg.grad, {velocity[k], 0}, lr, status},
                          {{"momentum", spec.momentum}, {"weight_decay", spec.weight_decay}, {"index", int64_t{k + 1}}},
                          g.node(pg.param).name + "/update");
      g.node(u).role = NodeRole::backward;
      g.node(u).source = pg.param;
      status = {u, 2};
      updates_after[v].push_back(u);
    }
  std::vector<EntryRef> grads, outputs;  // (sorted: a search over the gradients per output was quadratic)
  for (const ParamGrad& pg : tg.grads) grads.push_back(pg.grad);
  std::sort(grads.begin(), grads.end());
  for (const EntryRef& e : g.outputs)
    if (!std::binary_search(grads.begin(), grads.end(), e)) outputs.push_back(e);  // a gradient dies at its update
  g.outputs = std::move(outputs);
  std::vector<int> order;
  order.reserve(g.size());
  for (int v = 0; v < n; ++v) {
    order.push_back(v);
    if (v == forward_end) order.insert(order.end(), at_forward_end.begin(), at_forward_end.end());
    order.insert(order.end(), updates_after[v].begin(), updates_after[v].end());
  }
  const std::vector<int> new_id = g.permute(order);
  auto remap = [&](EntryRef e) { return EntryRef{new_id[e.node], e.index}; };
  status = remap(status);
  tg.loss = remap(tg.loss);
  for (ParamGrad& pg : tg.grads) pg.param = new_id[pg.param], pg.grad = remap(pg.grad);
  // State updates (BatchNorm running statistics) become assign nodes at the end, gated on the
  // step's final status: a step that failed leaves them as they were.
  const std::vector<StateUpdate> state = std::move(g.state_updates);
  g.state_updates.clear();
  for (const StateUpdate& u : state) {
    const int a = g.add("assign", {{u.param, 0}, u.value, status}, {}, g.node(u.param).name + "/assign");
    g.node(a).role = NodeRole::backward;
    g.node(a).source = u.param;
  }
  g.outputs.push_back(status);
  tg.lr = new_id[lr.node];
  tg.optimizer_state.clear();
  for (int v : velocity) tg.optimizer_state.push_back(new_id[v]);
  tg.status = status;
}

}  // namespace mnemo
