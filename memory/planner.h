// Static memory planning (Chen et al. Sec. 3; the address half of OLLA): from the liveness of
// every buffer over the exact schedule, assign offsets in one 256-byte aligned arena.
//   none     every entry its own region (no in-place, no sharing)
//   inplace  in-place only: buffers taken over by in-place outputs, no sharing across lifetimes
//   share    in-place + sharing: buffers whose lifetimes do not overlap share addresses
// Requires: a typed graph whose node order is the schedule. Provides: MemoryPlan + PlanStats.
#pragma once
#include <string>

#include "core/memory_plan.h"
#include "memory/liveness.h"

namespace mnemo {

enum class AllocMode { none, inplace, share };
AllocMode parse_alloc_mode(const std::string& name);  // throws listing the valid names
const char* alloc_mode_name(AllocMode m);

struct PlanStats {
  int64_t feature_map_bytes = 0;  // arena bytes for activations and their gradients
  int64_t workspace_bytes = 0;    // extra arena bytes for op workspace
  int64_t persistent_bytes = 0;   // the region of `persistent` entries (parameter gradients)
  int64_t arena_bytes = 0;        // all three: what the executor allocates
  int64_t max_live_bytes = 0;     // lower bound for feature maps + workspace
  double fragmentation = 0;       // (feature + workspace - max_live) / (feature + workspace)
  int buffers = 0;
  int inplace = 0;
  double planning_seconds = 0;
};

// `persistent`: entries (parameter gradients) whose buffers get a region of their own above the
// feature maps and workspace (ARCHITECTURE.md: gradients of parameters live beside them).
// `device`: the backend the plan is for (its workspace sizes); null: the CPU.
MemoryPlan plan_memory(const Graph& g, AllocMode mode, PlanStats* stats = nullptr,
                       const std::vector<EntryRef>& persistent = {}, const Device* device = nullptr);

// Offsets for `items` (bytes, [start, end]) such that items live at the same step never overlap;
// returns the arena size. Items whose offset is already >= 0 stay where they are; the others are
// placed largest first, each at the best-fitting gap among the items live at the same time
// (interval packing), else above them.
int64_t pack_intervals(const std::vector<Buffer>& items, std::vector<int64_t>& offsets);

}  // namespace mnemo
