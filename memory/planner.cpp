// Offset assignment by interval packing, and the three allocation modes.
#include "memory/planner.h"

#include <algorithm>
#include <bit>
#include <chrono>
#include <cstring>
#include <numeric>

#include "memory/placement.h"

namespace mnemo {

AllocMode parse_alloc_mode(const std::string& name) {
  if (name == "none") return AllocMode::none;
  if (name == "inplace") return AllocMode::inplace;
  if (name == "share") return AllocMode::share;
  MNEMO_FAIL() << "unknown memory mode '" << name << "' (expected none, inplace or share)";
}

const char* alloc_mode_name(AllocMode m) {
  switch (m) {
    case AllocMode::none: return "none";
    case AllocMode::inplace: return "inplace";
    case AllocMode::share: return "share";
  }
  return "?";
}

int64_t pack_intervals(const std::vector<Buffer>& items, std::vector<int64_t>& offsets, PackOrder by, int64_t give_up_above) {
  static_assert(std::endian::native == std::endian::little, "the flags below are read 8 at a time, the first in the low byte");
  const size_t n = items.size();
  offsets.resize(n, -1);
  auto size_of = [&](size_t i) { return align_up(std::max<int64_t>(items[i].bytes, 1)); };
  std::vector<size_t> order, fixed;  // the items to place, and those placed already
  for (size_t i = 0; i < n; ++i) (offsets[i] < 0 ? order : fixed).push_back(i);
  // Largest first (or longest lived, or largest bytes x steps); among equals, largest, then
  // earliest first (stable: deterministic plans).
  auto steps = [&](size_t i) { return static_cast<int64_t>(items[i].end) - items[i].start + 1; };
  auto key = [&](size_t i) {
    switch (by) {
      case PackOrder::lifetime: return steps(i);
      case PackOrder::area: return items[i].bytes * steps(i);
      case PackOrder::size: break;
    }
    return items[i].bytes;
  };
  std::stable_sort(order.begin(), order.end(), [&](size_t a, size_t b) {
    if (key(a) != key(b)) return key(a) > key(b);
    if (items[a].bytes != items[b].bytes) return items[a].bytes > items[b].bytes;
    return items[a].start < items[b].start;
  });
  // Placed items kept sorted by offset, as parallel arrays: each new item first flags the ones
  // that meet it in time from their lifetimes alone (a branch-free pass the compiler vectorises;
  // about 1/4 of the placed items meet it on a training step's buffers), then visits only those,
  // in address order, 8 flags a word. (An array of structs scanned with a branch per item took
  // 1.75x as long on the 9463 buffers of a 5005-node ResNet's budget plan; indexing the placed
  // items by time buckets was slower still: the largest items, placed first, are the long-lived
  // ones, listed in most buckets.)
  std::vector<int> p_start, p_end;
  std::vector<int64_t> p_offset, p_top;
  int64_t top = 0;
  std::stable_sort(fixed.begin(), fixed.end(), [&](size_t a, size_t b) { return offsets[a] < offsets[b]; });
  for (size_t i : fixed) {
    p_start.push_back(items[i].start), p_end.push_back(items[i].end);
    p_offset.push_back(offsets[i]), p_top.push_back(offsets[i] + size_of(i));
    top = std::max(top, offsets[i] + size_of(i));
  }
  std::vector<uint8_t> meets;
  for (size_t k : order) {
    const Buffer& it = items[k];
    const int64_t size = size_of(k);
    const int first = it.start, last = it.end;
    const size_t placed = p_offset.size();
    meets.assign((placed + 7) / 8 * 8, 0);  // (whole words of 8 flags, the padding 0)
    const int* ps = p_start.data();
    const int* pe = p_end.data();
    uint8_t* flag = meets.data();
    for (size_t j = 0; j < placed; ++j) flag[j] = static_cast<uint8_t>((ps[j] <= last) & (first <= pe[j]));
    // Best fit: the smallest gap between time-overlapping neighbours that holds the item; else
    // the first free offset above them.
    int64_t best = -1, best_gap = INT64_MAX, cursor = 0;
    for (size_t w = 0; w < meets.size(); w += 8) {
      uint64_t bits;
      std::memcpy(&bits, flag + w, 8);
      while (bits) {
        const size_t j = w + static_cast<size_t>(std::countr_zero(bits)) / 8;
        bits &= bits - 1;
        const int64_t gap = p_offset[j] - cursor;
        if (gap >= size && gap < best_gap) best = cursor, best_gap = gap;
        cursor = std::max(cursor, p_top[j]);
      }
    }
    const int64_t at = best >= 0 ? best : cursor;
    offsets[k] = at;
    top = std::max(top, at + size);
    if (give_up_above >= 0 && top > give_up_above) return top;  // (offsets incomplete)
    // After the placed items at or below `at` (equal offsets: in placing order).
    const auto pos = std::upper_bound(p_offset.begin(), p_offset.end(), at) - p_offset.begin();
    p_start.insert(p_start.begin() + pos, it.start), p_end.insert(p_end.begin() + pos, it.end);
    p_offset.insert(p_offset.begin() + pos, at), p_top.insert(p_top.begin() + pos, at + size);
  }
  return top;
}

MemoryPlan plan_memory(const Graph& g, AllocMode mode, PlanStats* stats, const std::vector<EntryRef>& gradients,
                       const Device* device, int64_t prune_above, std::vector<PreparedKernel> kernels, double exact_seconds,
                       int64_t enough, Liveness* liveness) {
  const auto t0 = std::chrono::steady_clock::now();
  MemoryPlan plan;
  plan.kernels = kernels.empty() ? prepare_kernels(g, device) : std::move(kernels);
  Liveness l = analyze_liveness(g, mode != AllocMode::none, plan.kernels);
  const int64_t live = max_live_bytes(l, true);  // the arena's lower bound
  if (stats && prune_above >= 0) {
    stats->max_live_bytes = live;
    if (stats->max_live_bytes > prune_above) {
      stats->pruned = true;
      stats->buffers = static_cast<int>(l.buffers.size());
      stats->planning_seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
      if (liveness) *liveness = std::move(l);
      return plan;
    }
  }
  // Classes in packing order: 0 feature maps, 1 parameter gradients, 2 workspace.
  std::vector<int> cls(l.buffers.size(), 0);
  for (size_t b = 0; b < l.buffers.size(); ++b)
    if (l.buffers[b].workspace) cls[b] = 2;
  for (const EntryRef& e : gradients)
    if (const int b = l.entry_buffer.at(e.node).at(e.index); b >= 0) cls[b] = 1;
  std::vector<int64_t> offsets(l.buffers.size(), -1);
  int64_t top[3] = {0, 0, 0};  // arena size after packing classes 0..k
  bool joint_packing = false;  // the arena is a packing of all classes at once (top[2] its size)
  if (mode == AllocMode::share) {
    // Each class is packed into the gaps of the ones before it (fixed) and above them.
    std::vector<Buffer> items;
    std::vector<size_t> ids;
    std::vector<int64_t> off;
    for (int c = 0; c < 3; ++c) {
      for (size_t b = 0; b < l.buffers.size(); ++b)
        if (cls[b] == c) items.push_back(l.buffers[b]), ids.push_back(b);
      off.resize(items.size(), -1);
      top[c] = std::max(c ? top[c - 1] : 0, pack_intervals(items, off));
    }
    for (size_t k = 0; k < ids.size(); ++k) offsets[ids[k]] = off[k];
    // The classes packed one after another leave gaps the later ones cannot use (a workspace
    // above the feature maps where a joint packing would have slotted it in), and no one order
    // suits every graph: every buffer is also packed at once, largest first, longest lived first
    // and largest bytes x steps first, and the smallest arena wins (the first on ties, so
    // plans are deterministic). On optimal's plans this took Inception-v3's fragmentation from
    // 27% to under 1% (docs/MEMORY.md "Layout of the arena").
    // A packing at the live-bytes bound is optimal: then the others are not tried; and each stops
    // as soon as it is no smaller than the best so far.
    if (stats) stats->class_pass_bytes = top[2];
    for (PackOrder by : {PackOrder::size, PackOrder::lifetime, PackOrder::area}) {
      if (top[2] <= live || top[2] <= enough) break;
      std::vector<int64_t> joint(l.buffers.size(), -1);
      // (With `enough`, a packing is of use only within it: it gives up above it.)
      const int64_t give_up = enough >= 0 ? std::min(top[2] - 1, enough) : top[2] - 1;
      const int64_t size = pack_intervals(l.buffers, joint, by, give_up);
      if (size <= give_up) top[2] = size, offsets = std::move(joint), joint_packing = true;
    }
    if (stats) stats->arena_bound_bytes = std::min(live, top[2]), stats->placement = top[2] <= live ? "at the live-bytes bound" : "best fit";
    if (exact_seconds >= 0 && top[2] > live) {
      const PlacementReport pr = place_exactly(l.buffers, offsets, live, exact_seconds);
      if (pr.improved) top[2] = pr.arena_bytes, joint_packing = true;
      if (stats) stats->arena_bound_bytes = pr.bound_bytes, stats->placement = pr.status, stats->placement_seconds = pr.seconds;
    }
  } else {
    int64_t at = 0;
    for (int c = 0; c < 3; ++c) {
      for (size_t b = 0; b < l.buffers.size(); ++b)
        if (cls[b] == c) offsets[b] = at, at += align_up(l.buffers[b].bytes);
      top[c] = at;
    }
    if (stats) stats->arena_bound_bytes = top[2], stats->placement = "no sharing in this mode";
  }
  const int64_t arena = top[2];
  plan.mode = alloc_mode_name(mode);
  plan.entries.resize(g.size());
  plan.workspace.resize(g.size());
  for (size_t v = 0; v < g.size(); ++v) {
    const Node& node = g.node(static_cast<int>(v));
    plan.entries[v].resize(node.outputs.size());
    if (node.op->kind != OpKind::compute) continue;  // views alias their input at run time
    for (size_t j = 0; j < node.outputs.size(); ++j)
      if (!aliased_input(node, j)) plan.entries[v][j] = {offsets[l.entry_buffer[v][j]], static_cast<int64_t>(node.outputs[j].bytes())};
    if (const int b = l.workspace_buffer[v]; b >= 0) plan.workspace[v] = {offsets[b], l.buffers[b].bytes};
  }
  plan.arena_bytes = arena;
  if (stats) {
    stats->feature_map_bytes = top[0];
    stats->workspace_bytes = std::max<int64_t>(0, top[2] - top[1]);
    stats->joint_packing = joint_packing;
    stats->arena_bytes = arena;
    stats->max_live_bytes = live;
    Liveness grads_only;  // the gradient buffers alone (copying all of `l` would copy every node's slots)
    for (size_t b = 0; b < l.buffers.size(); ++b)
      if (cls[b] == 1) grads_only.buffers.push_back(l.buffers[b]);
    stats->param_grad_bytes = max_live_bytes(grads_only, false);
    stats->fragmentation = arena ? static_cast<double>(arena - stats->max_live_bytes) / static_cast<double>(arena) : 0.0;
    stats->buffers = static_cast<int>(l.buffers.size());
    stats->inplace = l.inplace_count;
    stats->planning_seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  }
  if (liveness) *liveness = std::move(l);
  return plan;
}

}  // namespace mnemo
