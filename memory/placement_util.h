// Pieces shared by the placement's files (memory/placement.cpp: the searches and place_exactly;
// memory/placement_starts.cpp: the packings they start from), and by the budget planner's fill
// repair (memory/budget_planner.cpp: the buffers live at a plan's heaviest step). Internal to memory/.
#pragma once
#include <algorithm>
#include <cstdint>
#include <vector>

#include "core/memory_plan.h"
#include "memory/liveness.h"

namespace mnemo::placing {

// A buffer's room in the arena: its bytes aligned (at least one alignment unit).
inline int64_t size_of(const Buffer& b) { return align_up(std::max<int64_t>(b.bytes, 1)); }

// The arena a placement needs: its highest buffer's end (unchecked; checked_arena also validates).
inline int64_t arena_top(const std::vector<Buffer>& items, const std::vector<int64_t>& offsets) {
  int64_t top = 0;
  for (size_t i = 0; i < items.size(); ++i) top = std::max(top, offsets[i] + size_of(items[i]));
  return top;
}

// The order of stacks whose room after the peak should be one piece: the latest end lowest
// (earlier start first on ties), so the buffers that die first are on top.
inline bool latest_end_first(const Buffer& a, const Buffer& b) { return a.end != b.end ? a.end > b.end : a.start < b.start; }

// Stacks `ids` upward from offset `at`, in their order; returns the top.
inline int64_t stack_up(const std::vector<Buffer>& items, const std::vector<int>& ids, std::vector<int64_t>& offsets, int64_t at) {
  for (int i : ids) offsets[i] = at, at += size_of(items[i]);
  return at;
}

// The first step with the most live bytes of `load` (live_bytes_per_step).
inline int heaviest_step(const std::vector<int64_t>& load) {
  return static_cast<int>(std::max_element(load.begin(), load.end()) - load.begin());
}

// The buffers of at least `bytes` (aligned).
inline std::vector<int> at_least(const std::vector<Buffer>& items, int64_t bytes) {
  std::vector<int> ids;
  for (size_t i = 0; i < items.size(); ++i)
    if (size_of(items[i]) >= bytes) ids.push_back(static_cast<int>(i));
  return ids;
}

// Whether buffer `b` is live at step `t`.
inline bool live_at(const Buffer& b, int t) { return b.start <= t && b.end >= t; }

// The buffers `ids` of `items` as a placement of their own: their lifetimes, their offsets in
// `offsets`, and their live-bytes bound.
struct Subset {
  std::vector<int> ids;
  std::vector<Buffer> items;
  std::vector<int64_t> offsets;
  int64_t live_bytes = 0;
  // Writes the subset's offsets into `all` (one per buffer of the whole).
  void into(std::vector<int64_t>& all) const {
    for (size_t k = 0; k < ids.size(); ++k) all[ids[k]] = offsets[k];
  }
};
inline Subset subset(const std::vector<Buffer>& items, const std::vector<int64_t>& offsets, std::vector<int> ids) {
  Subset s;
  s.ids = std::move(ids);
  for (int i : s.ids) s.items.push_back(items[i]), s.offsets.push_back(offsets[i]);
  Liveness l;
  l.buffers = s.items;
  s.live_bytes = max_live_bytes(l, true);
  return s;
}

}  // namespace mnemo::placing
