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
  const Graph& old = tg.graph;
  const int n = static_cast<int>(old.size());
  const int forward_end = tg.num_forward - 1;  // the loss check goes right after the forward nodes
  // The entry whose memory each entry is (views resolve to what they alias), and the last node
  // reading that memory (per entry: a node's other outputs do not hold an update back). Entries
  // are numbered node by node (first[v] + index); flat arrays, as this runs once per candidate
  // plan in the mirror searches.
  std::vector<int> first(static_cast<size_t>(n) + 1, 0);
  for (int v = 0; v < n; ++v) first[v + 1] = first[v] + static_cast<int>(old.node(v).outputs.size());
  auto slot = [&](EntryRef e) { return static_cast<size_t>(first[e.node] + e.index); };
  std::vector<EntryRef> root(static_cast<size_t>(first[n]));
  for (int v = 0; v < n; ++v)
    for (int j = first[v]; j < first[v + 1]; ++j) root[static_cast<size_t>(j)] = {v, j - first[v]};
  std::vector<int> last_read(static_cast<size_t>(first[n]), -1);
  for (int v = 0; v < n; ++v) {
    const Node& node = old.node(v);
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

  // What is read of the old nodes after they are moved into the new graph.
  std::vector<std::string> param_name(tg.grads.size()), state_name(old.state_updates.size());
  std::vector<TensorType> param_type(tg.grads.size());
  for (size_t k = 0; k < tg.grads.size(); ++k)
    param_name[k] = old.node(tg.grads[k].param).name, param_type[k] = old.node(tg.grads[k].param).outputs[0];
  for (size_t k = 0; k < old.state_updates.size(); ++k) state_name[k] = old.node(old.state_updates[k].param).name;

  TrainingGraph out;
  Graph& g = out.graph;
  g.reserve(static_cast<size_t>(n) + 2 * tg.grads.size() + old.state_updates.size() + 2);
  std::vector<int> new_id(n, -1);
  auto remap = [&](EntryRef e) { return EntryRef{new_id[e.node], e.index}; };
  EntryRef lr, status;
  std::vector<int> velocity(tg.grads.size(), -1);
  for (int v = 0; v < n; ++v) {
    Node node = std::move(tg.graph.node(v));  // (moved: the old graph is replaced below)
    for (EntryRef& e : node.inputs) e = remap(e);
    new_id[v] = g.push(std::move(node));
    if (v == forward_end) {
      // The learning rate in the parameters' dtype (float64 graphs get it unrounded).
      const DType dt = tg.grads.empty() ? DType::f32 : param_type[0].dtype;
      lr = g.input("optimizer/lr", TensorType{dt, {1}});
      for (size_t k = 0; k < tg.grads.size(); ++k) velocity[k] = g.param("velocity/" + param_name[k], param_type[k], false).node;
      status = g.add1("finite_check", {remap(tg.loss)}, {}, "optimizer/loss_check");
      g.node(status.node).role = NodeRole::backward;
      g.node(status.node).source = tg.loss.node;
    }
    for (int k : after[v]) {
      const ParamGrad& pg = tg.grads[k];
      const std::string& name = param_name[k];
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
  // State updates (BatchNorm running statistics) become assign nodes at the end, gated on the
  // step's final status: a step that failed leaves them as they were.
  for (size_t k = 0; k < old.state_updates.size(); ++k) {
    const StateUpdate& u = old.state_updates[k];
    const int a = g.add("assign", {{new_id[u.param], 0}, remap(u.value), status}, {}, state_name[k] + "/assign");
    g.node(a).role = NodeRole::backward;
    g.node(a).source = u.param;
  }
  g.outputs.push_back(status);
  out.lr = lr.node;
  out.optimizer_state = velocity;
  out.status = status;
  tg = std::move(out);
}

}  // namespace mnemo
