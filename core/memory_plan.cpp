// The trivial memory plan: one region per entry.
#include "core/memory_plan.h"

#include "core/device.h"

namespace mnemo {

std::vector<PreparedKernel> prepare_kernels(const Graph& g, const Device* device) {
  const Device& d = device_or_cpu(device);
  std::vector<PreparedKernel> k(g.size());
  for (size_t i = 0; i < g.size(); ++i)
    if (g.node(static_cast<int>(i)).is(OpKind::compute)) k[i] = d.prepare(g, static_cast<int>(i));
  return k;
}

size_t node_workspace_bytes(const Graph& g, int id, const Device* device) {
  if (!g.node(id).is(OpKind::compute)) return 0;
  return device_or_cpu(device).prepare(g, id).workspace;
}

std::optional<EntryRef> aliased_input(const Node& node, size_t j) {
  if (node.is(OpKind::view)) return node.inputs[0];
  for (const InplaceOption& u : node.op->updates)
    if (u.output == static_cast<int>(j)) return node.inputs[u.input];
  return std::nullopt;
}

EntryRef owning_entry(const Graph& g, EntryRef e) {
  for (;;) {
    const std::optional<EntryRef> in = aliased_input(g.node(e.node), static_cast<size_t>(e.index));
    if (!in) return e;
    e = *in;
  }
}

MemoryPlan plan_separate(const Graph& g, const Device* device) {
  MemoryPlan plan;
  plan.mode = "none";
  plan.entries.resize(g.size());
  plan.workspace.resize(g.size());
  plan.kernels = prepare_kernels(g, device);
  int64_t top = 0;
  for (size_t i = 0; i < g.size(); ++i) {
    const Node& n = g.node(static_cast<int>(i));
    plan.entries[i].resize(n.outputs.size());
    if (n.op->kind != OpKind::compute) continue;
    for (size_t j = 0; j < n.outputs.size(); ++j) {
      if (aliased_input(n, j)) continue;
      const int64_t bytes = static_cast<int64_t>(n.outputs[j].bytes());
      plan.entries[i][j] = {top, bytes};
      top += align_up(bytes);
    }
    if (const int64_t ws = static_cast<int64_t>(plan.kernels[i].workspace)) {
      plan.workspace[i] = {top, ws};
      top += align_up(ws);
    }
  }
  plan.arena_bytes = top;
  return plan;
}

}  // namespace mnemo
