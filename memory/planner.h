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
  int64_t feature_map_bytes = 0;  // arena bytes for activations and their gradients, packed alone
  int64_t param_grad_bytes = 0;   // planned peak of the `gradients` buffers (live at once)
  int64_t workspace_bytes = 0;    // arena bytes the op workspaces add on top of all entries
  int64_t arena_bytes = 0;        // what the executor allocates: entries, gradients and workspace
  int64_t max_live_bytes = 0;     // lower bound for the arena
  double fragmentation = 0;       // (arena - max_live) / arena
  int buffers = 0;
  int inplace = 0;
  double planning_seconds = 0;
  bool pruned = false;            // max_live_bytes exceeded `prune_above`: no offsets were assigned
  bool joint_packing = false;     // share: all classes packed at once gave the smaller arena
  int64_t class_pass_bytes = 0;   // share: the arena of the class passes alone (>= arena_bytes)
  // share: the least arena any packing of these buffers can have, proven (max_live_bytes, or the
  // exact placement's bound: memory/placement.h), what the placement reached and its time
  int64_t arena_bound_bytes = 0;
  std::string placement;
  double placement_seconds = 0;
};

// Packing order: the feature maps first (so feature_map_bytes is the activation quantity of the
// papers' figures), then `gradients` (parameter gradients: ordinary entries that die at their
// optimiser update) into the gaps and above, then the workspaces. Every compute node is prepared
// on `device` (null: the CPU) once; the plan keeps those kernels (MemoryPlan::kernels). In
// `share` mode every buffer is also packed at once in three orders (PackOrder), and the smallest
// of the four arenas is the plan's (feature_map_bytes stays the feature maps packed alone).
// `prune_above` >= 0 (with `stats`): when the live-bytes lower bound of the arena already exceeds
// it, stop before packing (stats->pruned; the plan has no offsets). Searches use it to skip
// candidates that cannot beat the best arena found.
// `kernels`: the nodes' kernels already prepared on `device` (empty: prepared here).
// `exact_seconds` >= 0 (share): when the best packing is above the live-bytes bound, the exact
// placement of memory/placement.h for up to that long.
// `enough` >= 0 (share): an arena of at most this many bytes is enough (a search that asks only
// whether a plan fits): once a packing is within it, the rest are not tried, and a joint packing
// gives up as soon as it is above it. With no packing within it, the plan is the class passes'
// (valid, at least the full plan's arena): within `enough` exactly when the full plan is.
// `liveness` (non-null): receives the liveness analysis the plan was made from (also when pruned),
// for callers that analyse the plan further (the fills, the local search's repairs).
MemoryPlan plan_memory(const Graph& g, AllocMode mode, PlanStats* stats = nullptr,
                       const std::vector<EntryRef>& gradients = {}, const Device* device = nullptr,
                       int64_t prune_above = -1, std::vector<PreparedKernel> kernels = {}, double exact_seconds = -1,
                       int64_t enough = -1, Liveness* liveness = nullptr);

// The order in which pack_intervals places items: largest first, longest lived first, or largest
// bytes x steps first.
enum class PackOrder { size, lifetime, area };

// Offsets for `items` (bytes, [start, end]) such that items live at the same step never overlap;
// returns the arena size. Items whose offset is already >= 0 stay where they are; the others are
// placed in `by` order, each at the best-fitting gap among the items live at the same time
// (interval packing), else above them. `give_up_above` >= 0: stop (offsets incomplete) once the
// arena exceeds it, returning a size above it.
int64_t pack_intervals(const std::vector<Buffer>& items, std::vector<int64_t>& offsets, PackOrder by = PackOrder::size,
                       int64_t give_up_above = -1);

}  // namespace mnemo
