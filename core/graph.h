// The graph IR: a flat vector of nodes in topological order (every input refers to an earlier
// node), integer ids and no owning pointers, so dumps diff cleanly and plans are deterministic.
// Adding a node parses its attributes and infers its output types, so every graph is typed.
// The training graph (autograd/) is the same structure; its node order is the execution schedule.
#pragma once
#include <nlohmann/json_fwd.hpp>
#include <deque>
#include <string>
#include <unordered_map>
#include <vector>

#include "core/op_registry.h"

namespace mnemo {

enum class NodeRole : uint8_t { forward, recompute, backward };
const char* role_name(NodeRole r);

struct Node {
  std::string name;
  const OpDef* op = nullptr;
  Attrs attrs;
  std::shared_ptr<const void> params;  // op->parse(attrs)
  std::vector<EntryRef> inputs;
  std::vector<TensorType> outputs;
  NodeRole role = NodeRole::forward;
  int source = -1;  // recompute/backward nodes: the forward node they come from

  template <class P>
  const P& p() const { return *static_cast<const P*>(params.get()); }
  bool is(OpKind k) const { return op->kind == k; }
};

// Whether in-place option `o` of n's op applies to node `n`: an option on an optional input the
// node was built without (OpDef::accumulates) does not.
inline bool applies(const InplaceOption& o, const Node& n) { return o.input < static_cast<int>(n.inputs.size()); }

// After a step, the value of `value` is copied into parameter node `param` (BatchNorm running
// statistics: ops stay stateless, and a recompute can never update the statistics twice).
struct StateUpdate {
  int param;
  EntryRef value;
};

// The most nodes a graph may have (a training graph of the 1001-layer ResNet has ~17k): bounds the
// memory and the planners' work for any config that passes validation.
constexpr size_t kMaxNodes = size_t{1} << 22;

class Graph {
 public:
  // Adds a node running registered op `op`; returns its id. Throws mnemo::Error naming the node
  // when the op is unknown, an input is invalid, or inference rejects the input types.
  int add(const std::string& op, std::vector<EntryRef> inputs, Attrs attrs = {}, std::string name = "");
  EntryRef add1(const std::string& op, std::vector<EntryRef> inputs, Attrs attrs = {}, std::string name = "") {
    return {add(op, std::move(inputs), std::move(attrs), std::move(name)), 0};
  }
  EntryRef input(const std::string& name, TensorType t);
  EntryRef param(const std::string& name, TensorType t, bool trainable = true);
  // Appends an already typed node (inputs must refer to earlier nodes); used by graph rewrites.
  int push(Node n);
  // Room for `n` node names without rehashing (graph rewrites that rebuild a graph of known size).
  void reserve(size_t n) { by_name_.reserve(n); }
  // Puts the nodes in a new order: node order[k] becomes node k, its inputs and `outputs` and
  // `state_updates` renumbered; nodes not listed are removed (nothing listed may read them, nor
  // `outputs`). `order` must be a topological order (each node after the nodes it reads; checked).
  // Names stay, and the name index is renumbered in place: no name is hashed again but the removed
  // ones (graph rewrites that append nodes and then move them into place run this per candidate
  // plan; pushing every node into a new graph hashed every name). Returns the new id of each old
  // node, -1 for a removed one. Node::source (a forward node id) is not renumbered: callers keep
  // the forward nodes where they are.
  std::vector<int> permute(const std::vector<int>& order);

  size_t size() const { return nodes_.size(); }
  const Node& node(int id) const { return nodes_.at(id); }
  Node& node(int id) { return nodes_.at(id); }
  const std::deque<Node>& nodes() const { return nodes_; }
  const TensorType& type(EntryRef e) const;
  int find(const std::string& name) const;  // -1 if absent
  void rename(int id, std::string name);
  // While on, nodes added with no name get none (and no entry in the name index) until
  // name_unnamed() names them: for rewrites that name every node they add right after adding it
  // (autograd, per candidate plan: an automatic name made, indexed and then replaced cost three
  // more lookups and a string per node).
  void defer_names(bool on) { defer_names_ = on; }
  // Names unnamed node `id` `base`, or base_1, base_2, ... : the first one free.
  void name_unnamed(int id, const std::string& base);
  // `base` if no node has it, else the first of base_1, base_2, ... that none has.
  std::string unique_name(const std::string& base) const;
  bool trainable(int id) const;  // a param node with trainable=true
  // A copy that does not index names: its names are kept as given, unchecked and possibly
  // repeated, and find() may not be called on it. For the throwaway training graphs the mirror
  // searches build by the hundred, where indexing every node's name was a tenth of the planning.
  Graph copy_without_name_index() const {
    Graph g;  // (every member but the index: a member added to Graph is copied here too)
    g.nodes_ = nodes_;
    g.outputs = outputs;
    g.state_updates = state_updates;
    g.defer_names_ = defer_names_;
    g.index_names_ = false;
    return g;
  }
  bool names_indexed() const { return index_names_; }

  std::vector<EntryRef> outputs;             // kept alive to the end of the step
  std::vector<StateUpdate> state_updates;

  std::string to_text() const;
  nlohmann::json to_json() const;
  std::string to_dot() const;

 private:
  // Indexes node `id`'s name, first made unique (unique_name) when another node has it.
  void take_name(Node& n, int id);
  // A deque: adding a node never moves the others, so a `const Node&` a caller holds stays valid
  // across add/input/param (a vector would reallocate under it).
  std::deque<Node> nodes_;
  std::unordered_map<std::string, int> by_name_;
  bool defer_names_ = false;
  bool index_names_ = true;
};

// The op's cost estimate for node `id` of `g` (FLOPs and bytes moved of one call); zero for
// non-compute nodes; for ops without a cost function OpDef::cost's default (no FLOPs, the bytes of
// the inputs and outputs).
Cost node_cost(const Graph& g, int id);
// The cost of recomputing node `id` of a forward graph `g`: node_cost, or, when its op recomputes
// as another op (OpDef::recompute_as), that op's cost on the node's inputs and saved outputs. The
// planners' recompute costs (the fills, the knapsack bound, the programme) are this.
Cost recompute_cost(const Graph& g, int id);
// The op a recomputed copy of node `n` runs (OpDef::recompute_as): null for n's own op.
const OpDef* recompute_op(const Node& n);
// The outputs that copy makes: n's outputs other than its saved ones, in order (the saved ones
// must be n's last, so the copy's outputs keep their indices: asserted).
std::vector<TensorType> recompute_outputs(const Node& n);
// Whether output `j` of `n` is a saved output that its recomputed copies and backward read from
// the forward node itself (n recomputes as another op): live from n's step to its last backward
// reader in every mirror plan.
bool read_from_forward(const Node& n, int j);

// The types of node `id`'s inputs, in a list per thread that the next call on the same thread
// overwrites (its shapes keep their storage: this runs for every node of every candidate plan,
// and a fresh list allocated a shape per input).
const std::vector<TensorType>& input_types(const Graph& g, int id);

// Kahn's algorithm over `n` items with edges given as predecessor lists; ties keep the given
// order. Throws naming a node on a cycle. (Config loaders use it to order listed nodes.)
std::vector<int> topological_order(const std::vector<std::vector<int>>& preds,
                                   const std::vector<std::string>& names);

}  // namespace mnemo

namespace mnemo {
template <class P>
const P& GradContext::p() const { return node.p<P>(); }
}  // namespace mnemo
