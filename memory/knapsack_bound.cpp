// budget=SIZE's covering-knapsack bound (memory/mirror_planner.h: KnapsackBound,
// budget_lower_bound; docs/MEMORY.md "The knapsack bound").
#include <algorithm>
#include <utility>
#include <vector>

#include "core/memory_plan.h"
#include "memory/mirror_planner.h"

namespace mnemo {

namespace {

struct Piece {
  double cost, bytes;
};
bool cheaper_per_byte(const Piece& a, const Piece& b) { return a.cost * b.bytes < b.cost * a.bytes; }

}  // namespace

KnapsackBound::KnapsackBound(const Graph& fwd, const TrainingGraph& tg, double balance) {
  // Forward values the backward pass reads: per forward compute node, the bytes of its outputs
  // read by backward nodes (a recomputed copy stands for its forward node, a view for the node
  // whose memory it aliases). Whatever the mirror plan, a kept one of these is live when the
  // forward pass ends (the schedule runs all of forward first), and a dropped one is recomputed
  // at least once. `after`: read by any node after the forward pass, or a graph output or state
  // update (live when the forward pass ends in every plan).
  const Graph& g = tg.graph;
  std::vector<std::vector<char>> read(fwd.size()), after(fwd.size());
  for (size_t v = 0; v < fwd.size(); ++v) {
    read[v].assign(fwd.node(static_cast<int>(v)).outputs.size(), 0);
    after[v] = read[v];
  }
  // The forward compute entry `e` (of the training graph) stands for, through recomputed copies
  // and views; node -1 when none.
  auto owner = [&](EntryRef e) {
    const Node& src = g.node(e.node);
    // (nodes the optimiser update added after the gradient pass are not forward nodes)
    int u = src.role == NodeRole::recompute ? src.source : (e.node < tg.num_forward ? e.node : -1);
    if (u >= static_cast<int>(fwd.size())) u = -1;
    int index = e.index;
    while (u >= 0 && fwd.node(u).is(OpKind::view)) {  // the memory it aliases: that input's entry
      const EntryRef in = fwd.node(u).inputs[0];
      u = in.node, index = in.index;
    }
    return u >= 0 && fwd.node(u).is(OpKind::compute) ? EntryRef{u, index} : EntryRef{-1, 0};
  };
  for (size_t id = static_cast<size_t>(tg.num_forward); id < g.size(); ++id) {
    const Node& n = g.node(static_cast<int>(id));
    for (const EntryRef& x : n.inputs)
      if (const EntryRef e = owner(x); e.node >= 0) {
        after[e.node][e.index] = 1;
        if (n.role == NodeRole::backward) read[e.node][e.index] = 1;
      }
  }
  std::vector<EntryRef> pinned = g.outputs;
  for (const StateUpdate& s : g.state_updates) pinned.push_back(s.value);
  for (const EntryRef& x : pinned)
    if (const EntryRef e = owner(x); e.node >= 0) after[e.node][e.index] = 1;
  // Items: the forward nodes with outputs backward reads. One whose inputs include outputs of
  // compute nodes u that nothing reads after the forward pass (a ReLU's batch norm, a
  // concatenation's inputs) cannot be recomputed from nothing: each such u is recomputed too (its
  // cost) or its outputs are held until backward recomputes the item (its bytes are then live
  // when the forward pass ends: that much less saved). When k items read u that way, each is
  // charged 1/k of u's cost and bytes, so the bound holds whichever of them a plan drops and
  // whether it recomputes u or holds it (docs/MEMORY.md "The knapsack bound";
  // OptimalCheckpoints.KnapsackBoundHoldsForEveryPlanAndBalance).
  struct Item {
    int node;
    double cost, bytes;
    std::vector<std::pair<int, double>> held;  // (u, bytes of u's outputs it reads)
  };
  std::vector<Item> items;
  std::vector<int> sharing(fwd.size(), 0);  // per u: items holding it
  for (size_t v = 0; v < fwd.size(); ++v) {
    const Node& n = fwd.node(static_cast<int>(v));
    double bytes = 0;
    // (a node recomputed from its saved outputs, OpDef::recompute_as, leaves them live in every
    // plan: dropping it saves only its other outputs)
    for (size_t j = 0; j < n.outputs.size(); ++j)
      if (read[v][j] && !read_from_forward(n, static_cast<int>(j))) bytes += static_cast<double>(n.outputs[j].bytes());
    if (bytes == 0) continue;
    Item it{static_cast<int>(v), recompute_cost(fwd, static_cast<int>(v)).roofline(balance), bytes, {}};
    std::vector<EntryRef> seen;
    for (const EntryRef& x : n.inputs) {
      const EntryRef e = owning_entry(fwd, x);
      if (!fwd.node(e.node).is(OpKind::compute) || after[e.node][e.index] || e.node == it.node) continue;
      if (std::find(seen.begin(), seen.end(), e) != seen.end()) continue;
      seen.push_back(e);
      const double b = static_cast<double>(fwd.type(e).bytes());
      auto h = std::find_if(it.held.begin(), it.held.end(), [&](const auto& p) { return p.first == e.node; });
      if (h == it.held.end()) it.held.push_back({e.node, b}), ++sharing[e.node];
      else h->second += b;
    }
    items.push_back(std::move(it));
    saved_ += bytes;
  }
  // The LP relaxation of the covering knapsack (at() below). An item's options (hold every u, or
  // recompute some of them: cheapest cost per byte first is the best for its saving) as points
  // (saved, cost), their lower convex hull from (0, 0) in pieces; all pieces cheapest cost per
  // byte first, with their running sums.
  std::vector<Piece> pieces;
  for (const Item& it : items) {
    std::vector<Piece> ups;  // recomputing u instead of holding it: its cost, the bytes it frees
    double held = 0;
    for (const auto& [u, b] : it.held) {
      const double k = sharing[u];
      ups.push_back({recompute_cost(fwd, u).roofline(balance) / k, b / k});
      held += b / k;
    }
    std::sort(ups.begin(), ups.end(), cheaper_per_byte);
    std::vector<Piece> hull{{0, 0}};  // (cost, saved) points
    auto add = [&](double cost, double saves) {
      saves = std::max(0.0, saves);
      if (saves <= hull.back().bytes) return;  // (no more saved: a point above one already there)
      auto below = [&](const Piece& a, const Piece& b) {  // b under the line from a to the new point
        return (b.cost - a.cost) * (saves - a.bytes) < (cost - a.cost) * (b.bytes - a.bytes);
      };
      while (hull.size() >= 2 && !below(hull[hull.size() - 2], hull.back())) hull.pop_back();
      hull.push_back({cost, saves});
    };
    double x = it.bytes - held, y = it.cost;
    add(y, x);
    for (const Piece& up : ups) add(y += up.cost, x += up.bytes);
    for (size_t i = 1; i < hull.size(); ++i) pieces.push_back({hull[i].cost - hull[i - 1].cost, hull[i].bytes - hull[i - 1].bytes});
  }
  std::sort(pieces.begin(), pieces.end(), cheaper_per_byte);
  bytes_.push_back(0), cost_.push_back(0);
  for (const Piece& p : pieces) bytes_.push_back(bytes_.back() + p.bytes), cost_.push_back(cost_.back() + p.cost);
}

double KnapsackBound::at(int64_t arena_limit) const {
  // Dropped ones must cover what does not fit: the cheapest pieces whose bytes reach it, the last
  // one in part (all of them when even that is short: the bound of dropping everything).
  const double need = saved_ - static_cast<double>(arena_limit);
  if (need <= 0) return 0;
  const size_t k = static_cast<size_t>(std::lower_bound(bytes_.begin(), bytes_.end(), need) - bytes_.begin());
  if (k == bytes_.size()) return cost_.back();
  return cost_[k - 1] + (cost_[k] - cost_[k - 1]) * (need - bytes_[k - 1]) / (bytes_[k] - bytes_[k - 1]);
}

double budget_lower_bound(const Graph& fwd, const TrainingGraph& tg, int64_t arena_limit, double balance) {
  return KnapsackBound(fwd, tg, balance).at(arena_limit);
}

}  // namespace mnemo
