// Graph dumps: plain text (one node a line), JSON (stable keys; tools read it) and Graphviz DOT.
#include <nlohmann/json.hpp>
#include <sstream>

#include "core/graph.h"

namespace mnemo {

static std::string entry_name(const Graph& g, EntryRef e) {
  const Node& n = g.node(e.node);
  return n.outputs.size() == 1 ? n.name : n.name + ":" + std::to_string(e.index);
}

std::string Graph::to_text() const {
  std::ostringstream os;
  for (size_t i = 0; i < nodes_.size(); ++i) {
    const Node& n = nodes_[i];
    os << '%' << i << ' ' << n.name << " = " << n.op->name << '(';
    for (size_t j = 0; j < n.inputs.size(); ++j) os << (j ? ", " : "") << entry_name(*this, n.inputs[j]);
    os << ')';
    if (!n.attrs.empty()) {
      os << " {";
      bool first = true;
      for (const auto& [k, v] : n.attrs) os << (first ? "" : ", ") << k << ": " << attr_str(v), first = false;
      os << '}';
    }
    os << " -> ";
    for (size_t j = 0; j < n.outputs.size(); ++j) os << (j ? ", " : "") << n.outputs[j].str();
    if (n.role != NodeRole::forward)
      os << "  [" << role_name(n.role) << (n.source >= 0 ? " of " + nodes_[n.source].name : std::string()) << ']';
    os << '\n';
  }
  for (const EntryRef& e : outputs) os << "output " << entry_name(*this, e) << '\n';
  for (const StateUpdate& u : state_updates)
    os << "update " << nodes_[u.param].name << " <- " << entry_name(*this, u.value) << '\n';
  return os.str();
}

static nlohmann::json attr_json(const AttrValue& v) {
  return std::visit([](const auto& x) { return nlohmann::json(x); }, v);
}

nlohmann::json Graph::to_json() const {
  nlohmann::json nodes = nlohmann::json::array();
  for (const Node& n : nodes_) {
    nlohmann::json j;
    j["name"] = n.name;
    j["op"] = n.op->name;
    nlohmann::json in = nlohmann::json::array();
    for (const EntryRef& e : n.inputs) in.push_back({e.node, e.index});
    j["inputs"] = in;
    nlohmann::json attrs = nlohmann::json::object();
    for (const auto& [k, v] : n.attrs) attrs[k] = attr_json(v);
    j["attrs"] = attrs;
    nlohmann::json outs = nlohmann::json::array();
    for (const TensorType& t : n.outputs) outs.push_back({{"dtype", dtype_name(t.dtype)}, {"shape", t.shape}});
    j["outputs"] = outs;
    j["role"] = role_name(n.role);
    if (n.source >= 0) j["source"] = n.source;
    nodes.push_back(std::move(j));
  }
  nlohmann::json outs = nlohmann::json::array();
  for (const EntryRef& e : outputs) outs.push_back({e.node, e.index});
  nlohmann::json ups = nlohmann::json::array();
  for (const StateUpdate& u : state_updates) ups.push_back({{"param", u.param}, {"value", {u.value.node, u.value.index}}});
  return {{"format", "mnemo-graph-1"}, {"nodes", nodes}, {"outputs", outs}, {"state_updates", ups}};
}

std::string Graph::to_dot() const {
  std::ostringstream os;
  os << "digraph mnemo {\n  rankdir=TB;\n  node [shape=box, fontname=\"monospace\", fontsize=10];\n";
  for (size_t i = 0; i < nodes_.size(); ++i) {
    const Node& n = nodes_[i];
    const char* color = n.role == NodeRole::backward ? "lightsalmon"
                        : n.role == NodeRole::recompute ? "lightblue"
                        : n.is(OpKind::param) ? "khaki"
                        : n.is(OpKind::input) ? "palegreen" : "white";
    os << "  n" << i << " [label=\"" << n.name << "\\n" << n.op->name << ' ';
    for (size_t j = 0; j < n.outputs.size(); ++j) os << (j ? " " : "") << n.outputs[j].str();
    os << "\", style=filled, fillcolor=" << color << "];\n";
  }
  for (size_t i = 0; i < nodes_.size(); ++i)
    for (const EntryRef& e : nodes_[i].inputs) os << "  n" << e.node << " -> n" << i << ";\n";
  os << "}\n";
  return os.str();
}

}  // namespace mnemo
