// validate_plan: an independent check of a memory plan against the graph's schedule. It derives
// lifetimes itself (it shares no code with memory/) and rejects any plan in which two tensors
// that are live at the same step overlap, except an in-place output taking over the exact bytes
// of an input the op declared in-place and nothing reads afterwards.
#include <algorithm>

#include "core/memory_plan.h"

namespace mnemo {

namespace {
struct Item {
  int64_t begin, end;  // address range
  int def, last;       // live steps [def, last]
  int node, index;     // index -1: the node's workspace
};
}  // namespace

void validate_plan(const Graph& g, const MemoryPlan& plan, const Device* device) {
  const int n = static_cast<int>(g.size());
  MNEMO_ASSERT(static_cast<int>(plan.entries.size()) == n && static_cast<int>(plan.workspace.size()) == n)
      << "plan covers " << plan.entries.size() << " nodes, the graph has " << n;
  // Storage root of every entry: views resolve to the entry they alias.
  std::vector<std::vector<EntryRef>> root(n);
  for (int v = 0; v < n; ++v) {
    const Node& node = g.node(v);
    root[v].resize(node.outputs.size());
    for (size_t j = 0; j < node.outputs.size(); ++j) {
      const std::optional<EntryRef> in = aliased_input(node, j);  // views and state updated in place
      root[v][j] = in ? root[in->node][in->index] : EntryRef{v, static_cast<int>(j)};
    }
  }
  std::vector<std::vector<int>> last(n);
  std::vector<std::vector<bool>> kept(n);
  for (int v = 0; v < n; ++v) last[v].assign(g.node(v).outputs.size(), -1), kept[v].assign(g.node(v).outputs.size(), false);
  for (int v = 0; v < n; ++v) {
    for (size_t j = 0; j < g.node(v).outputs.size(); ++j) {
      EntryRef r = root[v][j];
      last[r.node][r.index] = std::max(last[r.node][r.index], v);
    }
    for (const EntryRef& e : g.node(v).inputs) {
      EntryRef r = root[e.node][e.index];
      last[r.node][r.index] = std::max(last[r.node][r.index], v);
    }
  }
  std::vector<EntryRef> keep = g.outputs;
  for (const StateUpdate& u : g.state_updates) keep.push_back(u.value);
  for (const EntryRef& e : keep) {
    EntryRef r = root[e.node][e.index];
    last[r.node][r.index] = n - 1;
    kept[r.node][r.index] = true;
  }

  // State updated in place (the optimiser's parameters): nothing reads it after its update.
  for (int v = 0; v < n; ++v) {
    const Node& node = g.node(v);
    for (const InplaceOption& u : node.op->updates) {
      const EntryRef in = node.inputs[u.input];
      MNEMO_ASSERT(g.node(in.node).is(OpKind::param)) << "plan: '" << node.name << "' updates '" << g.node(in.node).name
                                                     << "', which is not a param node";
      MNEMO_ASSERT(last[in.node][in.index] <= v || kept[in.node][in.index])
          << "plan: '" << g.node(in.node).name << "' is read at step " << last[in.node][in.index] << " after its update by '"
          << node.name << "' at step " << v;
    }
  }

  std::vector<Item> items;
  auto where = [&](int node, int index) {
    return g.node(node).name + (index < 0 ? " (workspace)" : ":" + std::to_string(index));
  };
  for (int v = 0; v < n; ++v) {
    const Node& node = g.node(v);
    MNEMO_ASSERT(plan.entries[v].size() == node.outputs.size()) << "plan: node '" << node.name << "' has "
                                                               << plan.entries[v].size() << " slots";
    if (node.op->kind != OpKind::compute) continue;
    for (size_t j = 0; j < node.outputs.size(); ++j) {
      if (aliased_input(node, j)) continue;
      const Slot& s = plan.entries[v][j];
      const int64_t bytes = static_cast<int64_t>(node.outputs[j].bytes());
      MNEMO_ASSERT(s.offset >= 0 && s.offset % kArenaAlignment == 0 && s.bytes >= bytes &&
                  s.offset + bytes <= plan.arena_bytes)
          << "plan: entry " << where(v, static_cast<int>(j)) << " slot [" << s.offset << ", +" << s.bytes
          << ") is not an aligned region of the " << plan.arena_bytes << "-byte arena holding " << bytes << " bytes";
      if (bytes) items.push_back({s.offset, s.offset + bytes, v, last[v][j], v, static_cast<int>(j)});
    }
    const int64_t ws = static_cast<int64_t>(node_workspace_bytes(g, v, device));
    if (ws) {
      const Slot& s = plan.workspace[v];
      MNEMO_ASSERT(s.offset >= 0 && s.offset % kArenaAlignment == 0 && s.bytes >= ws && s.offset + ws <= plan.arena_bytes)
          << "plan: workspace of '" << node.name << "' (" << ws << " bytes) is not inside the arena";
      items.push_back({s.offset, s.offset + ws, v, v, v, -1});
    }
  }
  // In-place takeover: f (written at step t) may reuse exactly e's bytes when e's last reader is t,
  // t reads e (possibly through views) on an input the op declares in place onto f, and e is
  // not a kept value.
  auto inplace_ok = [&](const Item& e, const Item& f) {
    if (e.index < 0 || f.index < 0 || e.last != f.def || e.begin != f.begin || e.end != f.end) return false;
    if (kept[e.node][e.index]) return false;
    const Node& t = g.node(f.node);
    for (const InplaceOption& o : t.op->inplace) {
      if (o.output != f.index || !applies(o, t)) continue;
      const EntryRef in = t.inputs[o.input];
      if (root[in.node][in.index] == EntryRef{e.node, e.index}) return true;
    }
    return false;
  };
  std::sort(items.begin(), items.end(), [](const Item& a, const Item& b) { return a.begin < b.begin; });
  for (size_t a = 0; a < items.size(); ++a) {
    for (size_t b = a + 1; b < items.size() && items[b].begin < items[a].end; ++b) {
      const Item& x = items[a];
      const Item& y = items[b];
      const bool overlap_in_time = x.def <= y.last && y.def <= x.last;
      if (!overlap_in_time) continue;
      const Item& first = x.def <= y.def ? x : y;
      const Item& second = x.def <= y.def ? y : x;
      if (first.def < second.def && inplace_ok(first, second)) continue;
      MNEMO_ASSERT(false) << "plan '" << plan.mode << "': " << where(first.node, first.index) << " (live steps " << first.def
                   << ".." << first.last << ", bytes [" << first.begin << "," << first.end << ")) overlaps "
                   << where(second.node, second.index) << " (live steps " << second.def << ".." << second.last
                   << ", bytes [" << second.begin << "," << second.end << "))";
    }
  }
}

}  // namespace mnemo
