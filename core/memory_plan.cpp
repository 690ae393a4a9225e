// The trivial memory plan: one region per entry.
#include "core/memory_plan.h"

#include "core/device.h"

namespace mnemo {

size_t node_workspace_bytes(const Graph& g, int id, const Device* device) {
  if (device) return device->workspace_bytes(g, id);
  const Node& n = g.node(id);
  if (!n.op->workspace) return 0;
  std::vector<TensorType> in;
  for (const EntryRef& e : n.inputs) in.push_back(g.type(e));
  return n.op->workspace(n.params.get(), in, n.outputs);
}

MemoryPlan plan_separate(const Graph& g, const Device* device) {
  MemoryPlan plan;
  plan.mode = "none";
  plan.entries.resize(g.size());
  plan.workspace.resize(g.size());
  int64_t top = 0;
  for (size_t i = 0; i < g.size(); ++i) {
    const Node& n = g.node(static_cast<int>(i));
    plan.entries[i].resize(n.outputs.size());
    if (n.op->kind != OpKind::compute) continue;
    for (size_t j = 0; j < n.outputs.size(); ++j) {
      const int64_t bytes = static_cast<int64_t>(n.outputs[j].bytes());
      plan.entries[i][j] = {top, bytes};
      top += align_up(bytes);
    }
    if (const int64_t ws = static_cast<int64_t>(node_workspace_bytes(g, static_cast<int>(i), device))) {
      plan.workspace[i] = {top, ws};
      top += align_up(ws);
    }
  }
  plan.arena_bytes = top;
  return plan;
}

}  // namespace mnemo
