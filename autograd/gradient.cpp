// Alg. 2 (Chen et al. 2016): mirrored copies, backward construction, and the schedule.
#include "autograd/gradient.h"

#include <algorithm>
#include <map>
#include <numeric>

namespace mnemo {
namespace {

Attrs zero_attrs(const TensorType& t) {
  return {{"shape", std::vector<int64_t>(t.shape.begin(), t.shape.end())},
          {"dtype", std::string(dtype_name(t.dtype))}, {"value", 0.0}};
}

class Builder {
 public:
  // `fwd` becomes the scratch graph: the forward nodes first (same ids, never modified), then
  // everything autograd adds. (Taking it by value spares a copy of every forward node when the
  // caller moves its own copy in.)
  Builder(Graph fwd, const MirrorPlan& m) : g_(std::move(fwd)), fwd_(g_), nf_(g_.size()), m_(m) {
    MNEMO_ASSERT(m.empty() || m.size() == nf_) << "mirror plan has " << m.size() << " counts, the forward graph " << nf_ << " nodes";
    scheduled_.assign(nf_, true);
    mirror_of_.resize(nf_);
    for (size_t v = 0; v < nf_; ++v) mirror_of_[v] = static_cast<int>(v);
  }

  TrainingGraph build(const std::vector<Seed>& seeds, const std::vector<int>& wrt, EntryRef loss);

 private:
  int mirror_count(int v) const {
    const Node& n = fwd_.node(v);
    if (m_.empty() || n.is(OpKind::input) || n.is(OpKind::param)) return 0;
    MNEMO_CHECK(m_[v] >= 0) << "mirror count of node '" << n.name << "' is negative";
    return m_[v];
  }
  void make_mirrors();
  void schedule(int root);
  int add_node(int id, NodeRole role, int source, const std::string& name);
  void accumulate(EntryRef target, EntryRef contribution, int source);
  bool fold_into(EntryRef c, EntryRef sum);

  Graph g_;
  const Graph& fwd_;  // its forward part: nodes [0, nf_) of g_
  const size_t nf_;
  const MirrorPlan& m_;
  std::vector<bool> scheduled_;           // per scratch node
  std::vector<int> order_;                // schedule of non-forward nodes
  std::vector<int> mirror_of_;            // a[v]: the node backward reads for forward node v
  // The entry backward (or a later copy) reads for forward entry e: a[v]'s, or, where a[v] is a
  // copy recomputing from v's saved outputs (OpDef::recompute_as), v's own for those.
  EntryRef mirror_entry(EntryRef e) const {
    if (read_from_forward(fwd_.node(e.node), e.index)) return e;
    return {mirror_of_[e.node], e.index};  // (a copy's outputs are the forward node's first ones: make_mirrors)
  }
  std::map<EntryRef, EntryRef> grad_;     // forward entry -> running gradient sum
};

int Builder::add_node(int id, NodeRole role, int source, const std::string& name) {
  Node& n = g_.node(id);
  n.role = role;
  n.source = source;
  scheduled_.push_back(false);
  // Autograd's nodes come unnamed (names deferred); mirrors come named (push made it unique).
  if (n.name.empty()) g_.name_unnamed(id, name);
  return id;
}

// Alg. 2, first loop: for k = 1..max m, clone every node with k <= m(v), reading a[pred].
void Builder::make_mirrors() {
  int max_m = 0;
  for (size_t v = 0; v < nf_; ++v) max_m = std::max(max_m, mirror_count(static_cast<int>(v)));
  for (int k = 1; k <= max_m; ++k) {
    for (size_t v = 0; v < nf_; ++v) {
      if (k > mirror_count(static_cast<int>(v))) continue;
      Node clone = fwd_.node(static_cast<int>(v));
      for (EntryRef& e : clone.inputs) e = mirror_entry(e);
      // An op that recomputes from its saved outputs (OpDef::recompute_as) reads the forward
      // node's (they stay live for it, and backward reads them: mirror_entry) and runs the
      // cheaper op on the same params, whose outputs are the others (in order).
      if (const OpDef* as = recompute_op(clone)) {
        for (int j : clone.op->saved_outputs) clone.inputs.push_back({static_cast<int>(v), j});
        clone.outputs = recompute_outputs(clone);
        clone.op = as;
      }
      const std::string name = clone.name + "/mirror" + (k > 1 ? std::to_string(k) : "");
      clone.name = name;  // (push makes it unique as add_node would, without a rename)
      const int id = g_.push(std::move(clone));
      add_node(id, NodeRole::recompute, static_cast<int>(v), name);
      mirror_of_[v] = id;
    }
  }
}

// Appends `root` and its unscheduled ancestors to the schedule in topological order (Alg. 2:
// "append topological-order(ancestors(g[v])) - V'"). Ascending node id is a topological order
// here (nodes only read earlier ones) and, within a recomputed chain, it is the forward order:
// each recomputed value is produced right before the next link consumes it. (A DFS post-order
// would also be topological, but on an LSTM it recomputes every step's input branch before the
// recurrent chain reaches it, keeping all of them alive at once.)
void Builder::schedule(int root) {
  if (scheduled_[root]) return;
  std::vector<int> todo{root}, found;
  scheduled_[root] = true;
  while (!todo.empty()) {
    const int id = todo.back();
    todo.pop_back();
    found.push_back(id);
    for (const EntryRef& e : g_.node(id).inputs)
      if (!scheduled_[e.node]) {
        scheduled_[e.node] = true;
        todo.push_back(e.node);
      }
  }
  std::sort(found.begin(), found.end());
  order_.insert(order_.end(), found.begin(), found.end());
}

void Builder::accumulate(EntryRef target, EntryRef c, int source) {
  auto it = grad_.find(target);
  const bool folded = it != grad_.end() && fold_into(c, it->second);  // (before scheduling c)
  schedule(c.node);
  if (it == grad_.end() || folded) {
    grad_[target] = c;
    return;
  }
  // sum = previous + c; the add may run in place on the previous partial sum.
  const int id = g_.add("add", {it->second, c});
  add_node(id, NodeRole::backward, source, fwd_.node(source).name + "/grad_sum");
  schedule(id);
  it->second = {id, 0};
}

// Gives the node of `c` the running sum `sum` as its accumulator input (OpDef::accumulates) when
// its op has one and `c` is a fresh gradient nothing else reads yet; then `c` is the new sum.
// (Both are gradients of one entry, so their types agree: build() asserts each contribution's.)
bool Builder::fold_into(EntryRef c, EntryRef sum) {
  Node& n = g_.node(c.node);
  const int acc = n.op->accumulates;
  if (acc < 0 || c.index != 0 || scheduled_[c.node] || static_cast<int>(n.inputs.size()) != acc) return false;
  for (size_t id = c.node + 1; id < g_.size(); ++id)
    for (const EntryRef& e : g_.node(static_cast<int>(id)).inputs)
      if (e.node == c.node) return false;
  n.inputs.push_back(sum);
  return true;
}

TrainingGraph Builder::build(const std::vector<Seed>& seeds, const std::vector<int>& wrt, EntryRef loss) {
  // needs_grad[v]: v is requested, or reads an entry that needs a gradient.
  std::vector<bool> needs(nf_, false);
  for (int w : wrt) {
    MNEMO_ASSERT(w >= 0 && w < static_cast<int>(nf_)) << "gradient requested for missing node " << w;
    needs[w] = true;
  }
  for (size_t v = 0; v < nf_; ++v)
    for (const EntryRef& e : fwd_.node(static_cast<int>(v)).inputs)
      if (needs[e.node] && is_float(fwd_.type(e).dtype)) needs[v] = true;

  make_mirrors();
  g_.defer_names(true);  // every node autograd adds is named by add_node right after
  for (const Seed& s : seeds) {
    MNEMO_CHECK(fwd_.type(s.entry) == fwd_.type(s.gradient))
        << "seed for '" << fwd_.node(s.entry.node).name << "' has type " << fwd_.type(s.gradient).str()
        << ", expected " << fwd_.type(s.entry).str();
    MNEMO_ASSERT(!grad_.count(s.entry)) << "two seeds for one entry";
    grad_[s.entry] = s.gradient;
  }

  // Alg. 2, second loop: reverse topological order.
  for (int v = static_cast<int>(nf_) - 1; v >= 0; --v) {
    const Node& n = fwd_.node(v);
    if (!needs[v] || n.is(OpKind::input) || n.is(OpKind::param)) continue;
    GradContext ctx{n, {}, {}, {}};
    bool any = false;
    for (size_t j = 0; j < n.outputs.size(); ++j) {
      auto it = grad_.find({v, static_cast<int>(j)});
      const bool saved = std::count(n.op->saved_outputs.begin(), n.op->saved_outputs.end(), static_cast<int>(j));
      // A saved output (what the op's backward reads, e.g. lstm_cell's gate activations) has no
      // gradient of its own: a loss that depends on it would get a silently wrong gradient.
      if (it != grad_.end() && saved)
        throw NodeError(n.name, "node '" + n.name + "' (" + n.op->name + "): output " + std::to_string(j) +
                                    " is saved for the op's own backward and has no gradient, but the loss depends on it "
                                    "(read only its differentiable outputs on the way to the loss)");
      if (it != grad_.end() && !saved) {
        ctx.dout.emplace_back(it->second);
        any = true;
      } else {
        ctx.dout.emplace_back(std::nullopt);
      }
    }
    if (!any) continue;
    if (!n.op->grad) throw NodeError(n.name, "node '" + n.name + "' (" + n.op->name + ") is on the gradient path but its op is not differentiable");
    for (const EntryRef& e : n.inputs) ctx.inputs.push_back(mirror_entry(e));
    for (size_t j = 0; j < n.outputs.size(); ++j) ctx.outputs.push_back(mirror_entry({v, static_cast<int>(j)}));

    const size_t first_new = g_.size();
    std::vector<std::optional<EntryRef>> dx;
    try {
      dx = n.op->grad(g_, ctx);
    } catch (const Error& e) {
      throw Error("building the backward of node '" + n.name + "' (" + n.op->name + "): " + e.what());
    }
    MNEMO_ASSERT(dx.size() == n.inputs.size()) << "grad of op " << n.op->name << " returned " << dx.size()
                                              << " gradients for " << n.inputs.size() << " inputs";
    for (size_t id = first_new; id < g_.size(); ++id)
      add_node(static_cast<int>(id), NodeRole::backward, v,
               n.name + "/grad/" + g_.node(static_cast<int>(id)).op->name);
    for (size_t i = 0; i < n.inputs.size(); ++i) {
      const EntryRef in = n.inputs[i];
      if (!dx[i] || !needs[in.node] || !is_float(fwd_.type(in).dtype)) continue;
      MNEMO_ASSERT(g_.type(*dx[i]) == fwd_.type(in))
          << "grad of op " << n.op->name << " gives input " << i << " a gradient of type "
          << g_.type(*dx[i]).str() << ", expected " << fwd_.type(in).str();
      accumulate(in, *dx[i], v);
    }
  }

  // Requested gradients (zeros where none arrives), then the final renumbering.
  std::vector<EntryRef> wanted;
  for (int w : wrt) {
    auto it = grad_.find({w, 0});
    if (it == grad_.end()) {
      const int id = g_.add("constant", {}, zero_attrs(fwd_.type({w, 0})));
      add_node(id, NodeRole::backward, w, fwd_.node(w).name + "/grad/zeros");
      schedule(id);
      wanted.push_back({id, 0});
    } else {
      schedule(it->second.node);
      wanted.push_back(it->second);
    }
  }

  // The scratch graph becomes the training graph: the forward nodes, then the schedule (nodes
  // built but never scheduled are dropped). Its outputs and state updates name forward nodes,
  // which keep their ids.
  std::vector<int> order(nf_);
  std::iota(order.begin(), order.end(), 0);
  for (int id : order_)
    if (id >= static_cast<int>(nf_)) order.push_back(id);
  g_.defer_names(false);
  const std::vector<int> new_id = g_.permute(order);
  TrainingGraph tg;
  tg.graph = std::move(g_);
  auto remap = [&](EntryRef e) { return EntryRef{new_id[e.node], e.index}; };
  tg.num_forward = static_cast<int>(nf_);
  if (loss.valid()) {
    tg.loss = loss;
    if (std::find(tg.graph.outputs.begin(), tg.graph.outputs.end(), loss) == tg.graph.outputs.end())
      tg.graph.outputs.push_back(loss);
  }
  for (size_t i = 0; i < wrt.size(); ++i) {
    tg.grads.push_back({wrt[i], remap(wanted[i])});
    tg.graph.outputs.push_back(remap(wanted[i]));
  }
  return tg;
}

}  // namespace

TrainingGraph build_gradient_graph(const Graph& forward, const std::vector<Seed>& seeds,
                                   const std::vector<int>& wrt, const MirrorPlan& mirror) {
  return Builder(Graph(forward), mirror).build(seeds, wrt, EntryRef{});
}

TrainingGraph build_training_graph(const Graph& forward, EntryRef loss, const MirrorPlan& mirror, bool index_names) {
  const TensorType& lt = forward.type(loss);
  MNEMO_CHECK(lt.numel() == 1 && is_float(lt.dtype)) << "the loss must be a float scalar, got " << lt.str();
  // The seed dL/dL = 1 is a forward constant node appended to a copy of the forward graph.
  Graph fwd = index_names ? forward : forward.copy_without_name_index();
  const EntryRef one = fwd.add1("constant", {}, {{"shape", std::vector<int64_t>(lt.shape.begin(), lt.shape.end())},
                                                 {"dtype", std::string(dtype_name(lt.dtype))}, {"value", 1.0}},
                                "loss/grad_seed");
  MirrorPlan m = mirror;
  if (!m.empty()) m.push_back(0);
  std::vector<int> wrt;
  for (size_t v = 0; v < fwd.size(); ++v)
    if (fwd.trainable(static_cast<int>(v))) wrt.push_back(static_cast<int>(v));
  TrainingGraph tg = Builder(std::move(fwd), m).build({{loss, one}}, wrt, EntryRef{});
  tg.loss = loss;
  auto& outs = tg.graph.outputs;
  if (std::find(outs.begin(), outs.end(), loss) == outs.end()) outs.insert(outs.begin(), loss);
  return tg;
}

}  // namespace mnemo
