// Exact addresses (OLLA's location half, docs/MEMORY.md "Exact placement"): given buffers with
// fixed lifetimes and a packing of them (best fit, memory/planner.h), find a packing with a smaller
// arena, down to the live-bytes bound, or prove that none exists. Placing intervals of time in as
// little address space as possible is the dynamic storage allocation problem (NP-hard); the
// live-bytes bound (the largest sum of buffers live at one step) is not always reachable.
// The search is a branch and bound over placement sequences: each buffer at the lowest offset that
// clears the buffers placed before it that it meets in time, offsets never decreasing along the
// sequence. Every packing compacts (each buffer dropped, in address order, onto the ones below it)
// into such a sequence with no larger arena, so a search that runs to its end is a proof. It runs
// on neighbourhoods (the buffers near the arena's top free, the others fixed), on subsets (whose
// least arena bounds the whole's) and, when small enough, on the whole problem; the buffers below
// 1/4096 of the live bytes are packed into the gaps afterwards.
// Requires: buffers (memory/liveness.h); sizes are accounted 256-byte aligned (align_up), as
// pack_intervals does. Provides: offsets, the arena, a proven lower bound of it.
#pragma once
#include <string>
#include <vector>

#include "memory/liveness.h"

namespace mnemo {

struct PlacementReport {
  int64_t start_bytes = 0;  // the arena of the packing given
  int64_t arena_bytes = 0;  // ... of the packing returned (<= start_bytes)
  int64_t bound_bytes = 0;  // proven: no packing of these buffers has a smaller arena (>= live bytes)
  // "at the live-bytes bound" (optimal), "optimal" (proven by a search run to its end, above the
  // live bytes) or "time limit" (bound_bytes is then the best proven)
  std::string status;
  bool improved = false;    // the search found a smaller arena than the packing given
  double seconds = 0;
};

// Improves the packing `offsets` (one per buffer, each >= 0) of `items` within `seconds`,
// searching from it, from placement_starts and from the small buffers placed last, on top of the
// others placed exactly (the first at the bound ends it). `live_bytes`: a lower bound of the
// arena, normally max_live_bytes of the items.
// The report's status is placement_status(arena, live_bytes, bound).
PlacementReport place_exactly(const std::vector<Buffer>& items, std::vector<int64_t>& offsets, int64_t live_bytes, double seconds);

// The packings place_exactly searches from beside the one given, each named: best fit in
// pack_intervals' three orders; the buffers live at the heaviest step stacked (the longest lived
// lowest, or the latest ending lowest) with the others placed around them by best fit; and, with
// `always_split` or when none of those is at the live-bytes bound, two splits at the peaks (the
// buffers live at the heaviest step stacked as two nested chains from both ends, the buffers
// before and after it placed apart, recursively; docs/MEMORY.md "Exact placement"), which
// place_exactly searches from only when lower than every other start. Exposed for tests.
struct PlacementStart {
  std::string name;
  std::vector<int64_t> offsets;
  bool only_if_lowest = false;  // place_exactly searches from it only when no other start is as low
};
std::vector<PlacementStart> placement_starts(const std::vector<Buffer>& items, bool always_split = false);

// "at the live-bytes bound" (arena <= live_bytes: optimal), "optimal" (arena <= a bound proven
// above the live bytes) or "time limit".
const char* placement_status(int64_t arena, int64_t live_bytes, int64_t bound);

// The arena of `offsets` (max of offset + aligned size); throws if two buffers live at the same
// step overlap. Exposed for tests.
int64_t checked_arena(const std::vector<Buffer>& items, const std::vector<int64_t>& offsets);

}  // namespace mnemo
