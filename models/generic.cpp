// Generic graph builder (see generic.h).
#include "models/generic.h"

#include <unordered_map>

namespace mnemo {

namespace {
EntryRef resolve(const Graph& g, const std::string& ref, const std::string& where, const std::string& node) {
  std::string name = ref;
  int index = 0;
  if (auto colon = ref.rfind(':'); colon != std::string::npos && g.find(ref) < 0) {
    name = ref.substr(0, colon);
    try {
      index = std::stoi(ref.substr(colon + 1));
    } catch (...) {
      MNEMO_FAIL() << where << ": node '" << node << "': input '" << ref << "' has a bad output index";
    }
  }
  const int id = g.find(name);
  MNEMO_CHECK(id >= 0) << where << ": node '" << node << "': input '" << ref << "' names no input, param or node";
  MNEMO_CHECK(index >= 0 && index < static_cast<int>(g.node(id).outputs.size()))
      << where << ": node '" << node << "': input '" << ref << "': '" << name << "' has " << g.node(id).outputs.size()
      << " output(s), numbered from 0: no output " << index;
  return {id, index};
}
// batch_norm(x, gamma, beta, running_mean, running_var){eps, momentum} of a graph config: in a
// training graph the training-mode batch norm plus the running statistics' update (as
// ModelBuilder::batch_norm), in an evaluation graph the inference form on the running statistics.
void add_batch_norm(ModelBuilder& b, const std::vector<EntryRef>& in, const GraphNodeSpec& n, bool training) {
  AttrReader r(n.attrs, "batch_norm");
  const double eps = r.get_float("eps", 1e-5), momentum = r.get_float("momentum", 0.1);
  r.finish();
  Graph& g = b.graph();
  for (int k : {3, 4})
    MNEMO_CHECK(g.node(in[k].node).is(OpKind::param) && !g.trainable(in[k].node))
        << "node '" << n.name << "': batch_norm's inputs 3 and 4 (running mean and variance) must be params with "
        << "trainable: false";
  if (!training) {
    g.add("batch_norm", in, {{"eps", eps}, {"training", false}}, n.name);
    return;
  }
  const TensorType& t = g.type(in[0]);
  MNEMO_CHECK(t.shape.size() >= 2) << "node '" << n.name << "': batch_norm expects [N,C,...], got " << t.str();
  const int bn = g.add("batch_norm", {in[0], in[1], in[2]}, {{"eps", eps}, {"training", true}}, n.name);
  const int st = g.add("batch_norm_stats", {in[3], in[4], {bn, 1}, {bn, 2}},
                       {{"momentum", momentum}, {"eps", eps}, {"count", t.numel() / t.shape[1]}}, n.name + "/stats");
  g.state_updates.push_back({in[3].node, {st, 0}});
  g.state_updates.push_back({in[4].node, {st, 1}});
}

}  // namespace

BuiltModel build_graph_model(const GraphModelConfig& c, bool training) {
  BuiltModel m{ModelBuilder(DType::f32)};
  ModelBuilder& b = m.builder;
  b.set_training(training);
  std::unordered_map<std::string, int> index;
  for (const GraphVarSpec& v : c.inputs) {
    MNEMO_CHECK(!index.count(v.name)) << v.where << ": duplicate name '" << v.name << "'";
    index[v.name] = -1;
    b.input(v.name, v.shape, v.dtype);
  }
  for (const GraphVarSpec& p : c.params) {
    MNEMO_CHECK(!index.count(p.name)) << p.where << ": duplicate name '" << p.name << "'";
    MNEMO_CHECK(p.dtype == DType::f32) << p.where << ": param '" << p.name << "' must be float32";
    index[p.name] = -1;
    b.param(p.name, p.shape, p.init, p.trainable);
  }
  MNEMO_CHECK(b.graph().find("data") >= 0 && b.graph().find("labels") >= 0)
      << c.where << ": model.inputs must declare 'data' and 'labels'";
  // Order the listed nodes topologically by their named dependencies.
  for (size_t i = 0; i < c.nodes.size(); ++i) {
    MNEMO_CHECK(!index.count(c.nodes[i].name)) << c.nodes[i].where << ": duplicate name '" << c.nodes[i].name << "'";
    index[c.nodes[i].name] = static_cast<int>(i);
  }
  std::vector<std::vector<int>> preds(c.nodes.size());
  std::vector<std::string> names;
  for (size_t i = 0; i < c.nodes.size(); ++i) {
    names.push_back(c.nodes[i].name);
    for (const std::string& in : c.nodes[i].inputs) {
      std::string base = in.substr(0, in.rfind(':'));
      auto it = index.find(in);
      if (it == index.end()) it = index.find(base);
      MNEMO_CHECK(it != index.end()) << c.nodes[i].where << ": node '" << c.nodes[i].name << "': input '" << in
                                     << "' names no input, param or node";
      if (it->second >= 0) preds[i].push_back(it->second);
    }
  }
  std::vector<int> order;
  try {
    order = topological_order(preds, names);
  } catch (const NodeError& e) {
    throw Error(graph_node_where(c, e));  // the cycle's node, with its file and line
  }
  for (int i : order) {
    const GraphNodeSpec& n = c.nodes[i];
    std::vector<EntryRef> in;
    for (const std::string& r : n.inputs) in.push_back(resolve(b.graph(), r, n.where, n.name));
    try {
      const OpDef& def = op_registry().get(n.op);
      MNEMO_CHECK(!def.traits.updates_state) << "node '" << n.name << "': op '" << n.op
                                             << "' updates state (the optimiser's); a model graph cannot use it";
      MNEMO_CHECK(!def.traits.step_machinery) << "node '" << n.name << "': op '" << n.op
                                              << "' is the training step's own (inserted by its passes); a model graph cannot use it";
      if (n.op == "batch_norm" && in.size() == 5 && !n.attrs.count("training")) {
        add_batch_norm(b, in, n, training);
      } else if (n.op == "dropout" && in.size() == 1) {
        AttrReader r(n.attrs, "dropout");
        const double p = r.get_float("p", 0.5);
        r.finish();
        const EntryRef y = b.dropout(in[0], n.name, p);
        if (y == in[0]) b.graph().add("identity", {in[0]}, {}, n.name);  // evaluation: consumers still find the name
      } else {
        b.graph().add(n.op, in, n.attrs, n.name);
      }
    } catch (const Error& e) {
      throw Error(n.where + ": " + e.what());
    }
  }
  const int loss = b.graph().find(c.loss), logits = b.graph().find(c.logits);
  MNEMO_CHECK(loss >= 0) << c.where << ": model.loss '" << c.loss << "' names no node";
  {
    const TensorType& lt = b.graph().type({loss, 0});
    MNEMO_CHECK(lt.numel() == 1 && is_float(lt.dtype))
        << c.where << ": model.loss '" << c.loss << "' must be a float scalar (a loss node's output), got " << lt.str();
  }
  MNEMO_CHECK(c.logits.empty() || logits >= 0) << c.where << ": model.logits '" << c.logits << "' names no node";
  m.loss = {loss, 0};
  if (logits >= 0) m.logits = {logits, 0};
  if (logits >= 0) m.all_logits = {m.logits};
  m.layers = static_cast<int>(c.nodes.size());
  return m;
}

std::string graph_node_where(const GraphModelConfig& c, const NodeError& e) {
  for (const GraphNodeSpec& n : c.nodes)
    if (n.name == e.node()) return n.where + ": " + e.what();
  return e.what();
}

}  // namespace mnemo
