// Graph construction (parse + infer on every add), lookups and topological ordering.
#include "core/graph.h"

#include <algorithm>
#include <deque>

namespace mnemo {

const char* role_name(NodeRole r) {
  switch (r) {
    case NodeRole::forward: return "forward";
    case NodeRole::recompute: return "recompute";
    case NodeRole::backward: return "backward";
  }
  return "?";
}

std::string Graph::unique_name(const std::string& base) const {
  if (!index_names_ || !by_name_.count(base)) return base;
  for (int i = 1;; ++i) {
    std::string n = base + "_" + std::to_string(i);
    if (!by_name_.count(n)) return n;
  }
}

int Graph::add(const std::string& op, std::vector<EntryRef> inputs, Attrs attrs, std::string name) {
  const OpDef& def = op_registry().get(op);
  Node n;
  n.op = &def;
  MNEMO_CHECK(nodes_.size() < kMaxNodes) << "the graph has more than 2^22 nodes (adding '" << name << "', " << op
                                         << "): the model is too large to plan";
  const bool unnamed = name.empty() && defer_names_;
  if (!unnamed) {
    n.name = name.empty() ? unique_name(op + "_" + std::to_string(nodes_.size())) : std::move(name);
    MNEMO_CHECK(!index_names_ || !by_name_.count(n.name)) << "duplicate node name '" << n.name << "'";
  }
  // (Errors name the node; one added with its name deferred is named by its op and id.)
  auto who = [&] { return n.name.empty() ? "new node " + std::to_string(nodes_.size()) : "node '" + n.name + "'"; };
  const int id = static_cast<int>(nodes_.size());
  const int nin = static_cast<int>(inputs.size());
  MNEMO_CHECK(nin >= def.min_inputs && (def.max_inputs < 0 || nin <= def.max_inputs))
      << who() << " (" << op << "): takes " << def.min_inputs
      << (def.max_inputs < 0 ? "+" : def.max_inputs == def.min_inputs ? "" : ("-" + std::to_string(def.max_inputs)))
      << " inputs, got " << nin;
  thread_local std::vector<TensorType> in_types;  // (scratch: the shapes keep their storage, as in input_types)
  in_types.resize(static_cast<size_t>(nin));
  for (int i = 0; i < nin; ++i) {
    const EntryRef e = inputs[i];
    MNEMO_CHECK(e.node >= 0 && e.node < id && e.index >= 0 &&
                e.index < static_cast<int>(nodes_[e.node].outputs.size()))
        << who() << " (" << op << "): input " << i << " refers to missing entry (" << e.node
        << ":" << e.index << ")";
    in_types[i] = nodes_[e.node].outputs[e.index];
  }
  try {
    n.params = def.parse(attrs);
    n.outputs = def.infer(n.params.get(), in_types);
    for (const TensorType& t : n.outputs) (void)t.numel();  // sizes checked here, where the node is named
  } catch (const Error& err) {
    std::string types;
    for (const auto& t : in_types) types += (types.empty() ? "" : ", ") + t.str();
    throw Error(who() + " (" + op + ", inputs " + types + "): " + err.what());
  }
  n.attrs = std::move(attrs);
  n.inputs = std::move(inputs);
  if (!unnamed && index_names_) by_name_.emplace(n.name, id);
  nodes_.push_back(std::move(n));
  return id;
}

static Attrs variable_attrs(const TensorType& t) {
  return {{"shape", std::vector<int64_t>(t.shape.begin(), t.shape.end())},
          {"dtype", std::string(dtype_name(t.dtype))}};
}

EntryRef Graph::input(const std::string& name, TensorType t) {
  return add1("input", {}, variable_attrs(t), name);
}

EntryRef Graph::param(const std::string& name, TensorType t, bool trainable) {
  Attrs a = variable_attrs(t);
  if (!trainable) a["trainable"] = false;
  return add1("param", {}, std::move(a), name);
}

int Graph::push(Node n) {
  MNEMO_CHECK(nodes_.size() < kMaxNodes) << "the graph has more than 2^22 nodes: the model is too large to plan";
  const int id = static_cast<int>(nodes_.size());
  MNEMO_ASSERT(n.op) << "node '" << n.name << "' has no op";
  for (const EntryRef& e : n.inputs)
    MNEMO_ASSERT(e.node >= 0 && e.node < id) << "node '" << n.name << "' reads a later node " << e.node;
  if (n.name.empty()) n.name = unique_name(n.op->name);
  take_name(n, id);
  nodes_.push_back(std::move(n));
  return id;
}

void Graph::take_name(Node& n, int id) {
  // (one lookup when the name is new, as it is in graph rewrites: this runs per node per candidate plan)
  if (!index_names_ || by_name_.try_emplace(n.name, id).second) return;
  n.name = unique_name(n.name);
  by_name_.emplace(n.name, id);
}

std::vector<int> Graph::permute(const std::vector<int>& order) {
  const int n = static_cast<int>(nodes_.size());
  std::vector<int> new_id(static_cast<size_t>(n), -1);
  for (size_t k = 0; k < order.size(); ++k) {
    const int v = order[k];
    MNEMO_ASSERT(v >= 0 && v < n && new_id[v] < 0) << "permute: node " << v << " is missing or listed twice";
    new_id[v] = static_cast<int>(k);
  }
  // Everything checked before anything changes (and the messages name the nodes).
  auto kept = [&](int v) { return v >= 0 && v < n && new_id[v] >= 0; };
  for (size_t k = 0; k < order.size(); ++k)
    for (const EntryRef& e : nodes_[order[k]].inputs)
      MNEMO_ASSERT(new_id[e.node] >= 0 && new_id[e.node] < static_cast<int>(k))
          << "permute: node '" << nodes_[order[k]].name << "' reads node '" << nodes_[e.node].name << "', which "
          << (new_id[e.node] < 0 ? "is removed" : "would come after it");
  for (const EntryRef& e : outputs) MNEMO_ASSERT(kept(e.node)) << "permute: an output reads node " << e.node << ", which is removed";
  for (const StateUpdate& u : state_updates)
    MNEMO_ASSERT(kept(u.param) && kept(u.value.node)) << "permute: a state update reads a node that is removed";
  for (EntryRef& e : outputs) e.node = new_id[e.node];
  for (StateUpdate& u : state_updates) u.param = new_id[u.param], u.value.node = new_id[u.value.node];
  std::deque<Node> nodes;
  for (const int v : order) {
    Node& node = nodes_[v];
    for (EntryRef& e : node.inputs) e.node = new_id[e.node];
    nodes.push_back(std::move(node));
  }
  for (auto it = by_name_.begin(); index_names_ && it != by_name_.end();) {
    if (new_id[it->second] < 0) {
      it = by_name_.erase(it);
    } else {
      it->second = new_id[it->second];
      ++it;
    }
  }
  nodes_ = std::move(nodes);
  return new_id;
}

const std::vector<TensorType>& input_types(const Graph& g, int id) {
  const Node& n = g.node(id);
  thread_local std::vector<TensorType> in;
  in.resize(n.inputs.size());
  for (size_t i = 0; i < n.inputs.size(); ++i) in[i] = g.type(n.inputs[i]);
  return in;
}

Cost node_cost(const Graph& g, int id) {
  const Node& n = g.node(id);
  if (!n.is(OpKind::compute)) return {};
  const std::vector<TensorType>& in = input_types(g, id);
  if (n.op->cost) return n.op->cost(n.params.get(), in, n.outputs);
  // The default of OpDef::cost: no FLOPs, every input read and every output written once (a
  // layout reorder is a copy; until 2026-11-28 this returned zero, and budget took recomputing
  // `to_plain` / `to_blocked` for free).
  return {0, io_bytes(in, n.outputs)};
}

const OpDef* recompute_op(const Node& n) {
  if (!n.op->recompute_as) return nullptr;
  const char* name = n.op->recompute_as(n.params.get());
  return name ? &op_registry().get(name) : nullptr;
}

std::vector<TensorType> recompute_outputs(const Node& n) {
  const std::vector<int>& saved = n.op->saved_outputs;
  std::vector<TensorType> out;
  for (size_t j = 0; j < n.outputs.size(); ++j)
    if (!std::count(saved.begin(), saved.end(), static_cast<int>(j))) out.push_back(n.outputs[j]);
  for (int j : saved)
    MNEMO_ASSERT(j >= static_cast<int>(out.size())) << "op " << n.op->name << " recomputes as another op but its saved output " << j
                                                    << " is not among its last";
  return out;
}

bool read_from_forward(const Node& n, int j) {
  const std::vector<int>& saved = n.op->saved_outputs;
  return n.is(OpKind::compute) && std::count(saved.begin(), saved.end(), j) && recompute_op(n);
}

Cost recompute_cost(const Graph& g, int id) {
  const Node& n = g.node(id);
  const OpDef* as = n.is(OpKind::compute) ? recompute_op(n) : nullptr;
  if (!as) return node_cost(g, id);
  // Its inputs: the node's and its saved outputs; its outputs: the others.
  std::vector<TensorType> in = input_types(g, id);
  for (int j : n.op->saved_outputs) in.push_back(n.outputs[static_cast<size_t>(j)]);
  const std::vector<TensorType> out = recompute_outputs(n);
  MNEMO_ASSERT(as->cost) << "op " << as->name << " recomputes " << n.op->name << " but has no cost function";
  return as->cost(n.params.get(), in, out);
}

const TensorType& Graph::type(EntryRef e) const {
  MNEMO_CHECK(e.node >= 0 && e.node < static_cast<int>(nodes_.size())) << "no node " << e.node;
  const Node& n = nodes_[e.node];
  MNEMO_CHECK(e.index >= 0 && e.index < static_cast<int>(n.outputs.size()))
      << "node '" << n.name << "' has no output " << e.index;
  return n.outputs[e.index];
}

void Graph::name_unnamed(int id, const std::string& base) {
  Node& n = nodes_.at(id);
  MNEMO_ASSERT(n.name.empty()) << "name_unnamed: node " << id << " is named '" << n.name << "' already";
  n.name = base;
  take_name(n, id);
}

int Graph::find(const std::string& name) const {
  MNEMO_ASSERT(index_names_) << "find('" << name << "') in a graph whose names are not indexed";
  auto it = by_name_.find(name);
  return it == by_name_.end() ? -1 : it->second;
}

void Graph::rename(int id, std::string name) {
  Node& n = nodes_.at(id);
  if (n.name == name) return;
  if (!index_names_) {
    n.name = std::move(name);
    return;
  }
  MNEMO_CHECK(!by_name_.count(name)) << "duplicate node name '" << name << "'";
  by_name_.erase(n.name);
  n.name = std::move(name);
  by_name_[n.name] = id;
}

bool Graph::trainable(int id) const {
  const Node& n = nodes_.at(id);
  if (!n.is(OpKind::param)) return false;
  auto it = n.attrs.find("trainable");
  return it == n.attrs.end() || std::get<bool>(it->second);
}

std::vector<int> topological_order(const std::vector<std::vector<int>>& preds,
                                   const std::vector<std::string>& names) {
  const size_t n = preds.size();
  std::vector<int> indeg(n, 0);
  std::vector<std::vector<int>> succ(n);
  for (size_t v = 0; v < n; ++v)
    for (int u : preds[v]) {
      MNEMO_CHECK(u >= 0 && static_cast<size_t>(u) < n) << "node '" << names.at(v) << "' has a missing input";
      ++indeg[v];
      succ[u].push_back(static_cast<int>(v));
    }
  // A min-heap of ready ids would keep the listed order among ready nodes; a sorted deque of
  // ready ids, refilled in id order, does the same for our sizes.
  std::vector<int> order;
  std::vector<bool> done(n, false);
  std::deque<int> ready;
  for (size_t v = 0; v < n; ++v)
    if (indeg[v] == 0) ready.push_back(static_cast<int>(v));
  while (!ready.empty()) {
    int v = ready.front();
    ready.pop_front();
    order.push_back(v);
    done[v] = true;
    for (int s : succ[v])
      if (--indeg[s] == 0) ready.insert(std::upper_bound(ready.begin(), ready.end(), s), s);
  }
  if (order.size() != n) {
    // Every node left has a predecessor left (else it would have become ready): walking back
    // through those from any of them repeats a node, which is on a cycle. Named in data order.
    int v = 0;
    while (done[v]) ++v;
    std::vector<int> seen(n, -1), walk;
    while (seen[v] < 0) {
      seen[v] = static_cast<int>(walk.size());
      walk.push_back(v);
      v = *std::find_if(preds[v].begin(), preds[v].end(), [&](int u) { return !done[u]; });
    }
    std::string cycle;
    for (size_t k = walk.size(); k-- > static_cast<size_t>(seen[v]);) cycle += "'" + names.at(walk[k]) + "' -> ";
    throw NodeError(names.at(v), "the graph has a cycle through node '" + names.at(v) + "': " + cycle + "'" + names.at(walk.back()) + "'");
  }
  return order;
}

}  // namespace mnemo
