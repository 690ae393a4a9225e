// Buffers and their lifetimes over a graph's schedule (its node order). An entry lives in a
// buffer; a view shares its input's buffer, and so does an output an op updates in place (the
// optimiser's, on bound parameters: no buffer); an in-place output takes over its input's buffer.
// In-place happens (when enabled) exactly when the op declares the option, the input buffer is
// planned (not a param or graph input), holds no graph output or state-update value, and its
// reference count — pending reads of *any* entry stored in it, views included — is 1: this node
// is its last reader. Requires: a typed graph. Provides: Buffers with [start, end] steps.
#pragma once
#include <span>
#include <vector>

#include "core/graph.h"

namespace mnemo {

struct Buffer {
  int64_t bytes = 0;      // the largest entry stored (entries sharing one buffer by in-place have equal size)
  int start = 0;          // step (node id) that first writes it
  int end = 0;            // last step that reads it (inclusive); graph outputs: the last step
  bool workspace = false; // a node-local workspace (live at `start` only)
  bool operator==(const Buffer&) const = default;
};

struct Liveness {
  std::vector<Buffer> buffers;
  std::vector<std::vector<int>> entry_buffer;  // [node][output] -> buffer, -1: external (param/input)
  std::vector<int> workspace_buffer;           // [node] -> buffer or -1
  int inplace_count = 0;
  bool operator==(const Liveness&) const = default;
};

// `kernels`: every node's prepared kernel for the plan's device (core/memory_plan.h,
// prepare_kernels); their workspace bytes are the nodes' workspace buffers. `order` (non-empty):
// the schedule is that order of the graph's nodes (step s runs node order[s]; it must keep every
// input before its readers) instead of the node order, so a reordering can be judged without
// rebuilding the graph; buffers' steps are then positions in `order`.
Liveness analyze_liveness(const Graph& g, bool allow_inplace, std::span<const PreparedKernel> kernels,
                          std::span<const int> order = {});

// Per step, the sum of (256-aligned) bytes of the live buffers; `steps` entries (< 0: up to the
// last buffer's end; buffers beyond are cut off).
std::vector<int64_t> live_bytes_per_step(const Liveness& l, bool include_workspace, int steps = -1);

// max over steps of live_bytes_per_step: a lower bound for any arena that holds the buffers.
// `first_steps` >= 0: over the first `first_steps` steps only.
int64_t max_live_bytes(const Liveness& l, bool include_workspace, int first_steps = -1);

}  // namespace mnemo
