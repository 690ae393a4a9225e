// Liveness with per-buffer reference counts (Chen et al. Sec. 3, Fig. 2; MXNet's PlanMemory).
#include "memory/liveness.h"

#include <algorithm>
#include <numeric>

#include "core/memory_plan.h"

namespace mnemo {

Liveness analyze_liveness(const Graph& g, bool allow_inplace, std::span<const PreparedKernel> kernels, std::span<const int> order) {
  MNEMO_ASSERT(kernels.size() == g.size()) << "liveness: " << kernels.size() << " prepared kernels for " << g.size() << " nodes";
  MNEMO_ASSERT(order.empty() || order.size() == g.size()) << "liveness: an order of " << order.size() << " nodes for " << g.size();
  const int n = static_cast<int>(g.size());
  Liveness l;
  l.entry_buffer.resize(n);
  l.workspace_buffer.assign(n, -1);
  std::vector<int> refs;       // pending reads per buffer
  std::vector<bool> pinned;    // holds a graph output or state-update value
  // Pending reads per entry (a node reading one entry twice counts twice).
  std::vector<std::vector<int>> entry_reads(n);
  for (int v = 0; v < n; ++v) entry_reads[v].assign(g.node(v).outputs.size(), 0);
  for (int v = 0; v < n; ++v)
    for (const EntryRef& e : g.node(v).inputs) ++entry_reads[e.node][e.index];
  std::vector<EntryRef> keep = g.outputs;
  for (const StateUpdate& u : g.state_updates) keep.push_back(u.value);

  auto new_buffer = [&](int64_t bytes, int step, bool ws) {
    l.buffers.push_back({bytes, step, step, ws});
    refs.push_back(0);
    pinned.push_back(false);
    return static_cast<int>(l.buffers.size()) - 1;
  };

  for (int step = 0; step < n; ++step) {
    const int v = order.empty() ? step : order[step];
    const Node& node = g.node(v);
    l.entry_buffer[v].assign(node.outputs.size(), -1);
    if (node.is(OpKind::input) || node.is(OpKind::param)) continue;
    if (node.is(OpKind::view)) {
      const EntryRef in = node.inputs[0];
      const int b = l.entry_buffer[in.node][in.index];
      l.entry_buffer[v][0] = b;
      if (b >= 0) {
        // The view's own readers keep the buffer alive; the view node itself reads nothing at run time.
        refs[b] += entry_reads[v][0] - 1;
        l.buffers[b].end = std::max(l.buffers[b].end, step);
        for (const EntryRef& e : keep)
          if (e.node == v) pinned[b] = true;
      }
      continue;
    }
    // Outputs: the input's memory for state updated in place; in place on an input buffer whose
    // only pending read is this node; or a new buffer.
    std::vector<int> taken;
    for (size_t j = 0; j < node.outputs.size(); ++j) {
      if (const std::optional<EntryRef> in = aliased_input(node, j)) {
        l.entry_buffer[v][j] = l.entry_buffer[in->node][in->index];  // -1 for bound params
        MNEMO_ASSERT(l.entry_buffer[v][j] < 0) << "node '" << node.name << "' (" << node.op->name
                                               << ") updates a planned buffer in place; only param nodes may be updated";
        continue;
      }
      int b = -1;
      if (allow_inplace) {
        for (const InplaceOption& o : node.op->inplace) {
          if (o.output != static_cast<int>(j) || !applies(o, node)) continue;
          const EntryRef in = node.inputs[o.input];
          const int cand = l.entry_buffer[in.node][in.index];
          if (cand < 0 || pinned[cand] || refs[cand] != 1) continue;
          if (std::count(taken.begin(), taken.end(), cand)) continue;
          if (l.buffers[cand].bytes != static_cast<int64_t>(node.outputs[j].bytes())) continue;
          b = cand;
          ++l.inplace_count;
          break;
        }
      }
      if (b < 0) b = new_buffer(static_cast<int64_t>(node.outputs[j].bytes()), step, false);
      taken.push_back(b);
      l.entry_buffer[v][j] = b;
    }
    if (const int64_t ws = static_cast<int64_t>(kernels[v].workspace)) l.workspace_buffer[v] = new_buffer(ws, step, true);
    // This node's reads are done; then its outputs' readers become pending.
    for (const EntryRef& e : node.inputs) {
      const int b = l.entry_buffer[e.node][e.index];
      if (b < 0) continue;
      --refs[b];
      l.buffers[b].end = std::max(l.buffers[b].end, step);
    }
    for (size_t j = 0; j < node.outputs.size(); ++j) {
      const int b = l.entry_buffer[v][j];
      if (b < 0) continue;
      refs[b] += entry_reads[v][j];
      l.buffers[b].end = std::max(l.buffers[b].end, step);
    }
    for (const EntryRef& e : keep)
      if (e.node == v) {
        const int b = l.entry_buffer[v][e.index];
        if (b >= 0) pinned[b] = true;
      }
  }
  // Pinned buffers (and views of them) live to the end of the step.
  for (const EntryRef& e : keep) {
    const int b = l.entry_buffer[e.node][e.index];
    if (b >= 0) l.buffers[b].end = n - 1;
    if (b >= 0) pinned[b] = true;
  }
  return l;
}

std::vector<int64_t> live_bytes_per_step(const Liveness& l, bool include_workspace, int steps) {
  if (steps < 0) {
    steps = 0;
    for (const Buffer& b : l.buffers) steps = std::max(steps, b.end + 1);
  }
  std::vector<int64_t> live(static_cast<size_t>(steps) + 1, 0);
  for (const Buffer& b : l.buffers) {
    if ((b.workspace && !include_workspace) || b.start >= steps) continue;
    live[b.start] += align_up(b.bytes);
    live[std::min(steps, b.end + 1)] -= align_up(b.bytes);
  }
  for (int s = 1; s < steps; ++s) live[s] += live[s - 1];
  live.pop_back();
  return live;
}

int64_t max_live_bytes(const Liveness& l, bool include_workspace, int first_steps) {
  const std::vector<int64_t> live = live_bytes_per_step(l, include_workspace);
  const size_t steps = first_steps >= 0 ? std::min(live.size(), static_cast<size_t>(first_steps)) : live.size();
  return std::accumulate(live.begin(), live.begin() + static_cast<std::ptrdiff_t>(steps), int64_t{0},
                         [](int64_t a, int64_t b) { return std::max(a, b); });
}

}  // namespace mnemo
