// Memory-plan data: where each entry of a graph lives in one arena, plus per-node workspace.
// Planners (memory/) produce it; the executor consumes it. The trivial plan here gives every
// entry its own region; memory/ replaces it with liveness-based plans.
#pragma once
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "core/graph.h"

namespace mnemo {

constexpr int64_t kArenaAlignment = 256;
inline int64_t align_up(int64_t n, int64_t a = kArenaAlignment) { return (n + a - 1) / a * a; }

struct Slot {
  int64_t offset = -1;  // -1: not in the arena (bound from outside, or a view of its input)
  int64_t bytes = 0;
};

struct MemoryPlan {
  std::string mode;
  std::vector<std::vector<Slot>> entries;  // [node][output]
  std::vector<Slot> workspace;             // [node]
  int64_t arena_bytes = 0;
  // [node]: the kernel of each compute node prepared for the plan's device (its workspace is the
  // one planned above); the executor runs exactly these. Empty for other nodes.
  std::vector<PreparedKernel> kernels;
};

class Device;

// Every compute node of `g` prepared on `device` (null: the CPU): Device::prepare per node.
std::vector<PreparedKernel> prepare_kernels(const Graph& g, const Device* device = nullptr);
// Workspace bytes node `id` needs on `device` (null: the CPU): its prepared kernel's.
size_t node_workspace_bytes(const Graph& g, int id, const Device* device = nullptr);

// Whether output `j` of `node` is stored in the memory of one of its inputs rather than planned:
// a view's output, or an output the op updates in place (OpDef::updates). Returns that input.
std::optional<EntryRef> aliased_input(const Node& node, size_t j);
// The entry whose memory `e` is: through views and in-place updates to the entry that owns it.
EntryRef owning_entry(const Graph& g, EntryRef e);

// Every compute entry and every workspace in its own 256-byte aligned region (mode "none").
MemoryPlan plan_separate(const Graph& g, const Device* device = nullptr);

}  // namespace mnemo

namespace mnemo {
// Throws mnemo::Error naming the two tensors when two simultaneously live tensors overlap (except
// a declared in-place takeover), or when a slot lies outside the arena. The executor runs it in
// debug builds; the tests run it on every plan.
// `device`: the backend whose workspace sizes the plan was made for (null: the CPU).
void validate_plan(const Graph& g, const MemoryPlan& plan, const Device* device = nullptr);
}  // namespace mnemo
