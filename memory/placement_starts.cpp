// The packings the exact placement starts from (placement.h's placement_starts): best fit in
// pack_intervals' three orders, stacks at the peak, and the splits at the peaks.
#include <algorithm>
#include <numeric>
#include <utility>

#include "core/error.h"
#include "memory/parallel.h"
#include "memory/placement.h"
#include "memory/placement_util.h"
#include "memory/planner.h"

namespace mnemo {

using namespace placing;

namespace {

// The heaviest nested chain (by bytes) among `ids`: each buffer's lifetime within the one's
// before it (start not earlier, end not later), outermost first. A stack of such a chain from
// one offset keeps the buffers live at any step in one piece at its bottom. Weighted longest
// chain in the dominance order: by start, then latest end first; a Fenwick tree over the ends
// (reversed) gives the best chain ending in a lifetime that holds the next one.
std::vector<int> nested_chain(const std::vector<Buffer>& items, std::vector<int> ids) {
  std::stable_sort(ids.begin(), ids.end(), [&](int a, int b) {
    return items[a].start != items[b].start ? items[a].start < items[b].start : items[a].end > items[b].end;
  });
  std::vector<int> ends;
  for (int i : ids) ends.push_back(items[i].end);
  std::sort(ends.begin(), ends.end());
  ends.erase(std::unique(ends.begin(), ends.end()), ends.end());
  const size_t m = ends.size();
  // Tree position of an end: later ends first (1-based), so a prefix holds the ends >= it.
  auto pos = [&](int end) { return m - static_cast<size_t>(std::lower_bound(ends.begin(), ends.end(), end) - ends.begin()); };
  std::vector<std::pair<int64_t, int>> tree(m + 1, {0, -1});  // (bytes of the best chain, its last: index into ids)
  std::vector<int64_t> best(ids.size());
  std::vector<int> prev(ids.size(), -1);
  for (size_t k = 0; k < ids.size(); ++k) {
    std::pair<int64_t, int> in{0, -1};
    for (size_t p = pos(items[ids[k]].end); p > 0; p -= p & (~p + 1)) in = std::max(in, tree[p]);
    best[k] = in.first + size_of(items[ids[k]]), prev[k] = in.second;
    for (size_t p = pos(items[ids[k]].end); p <= m; p += p & (~p + 1)) tree[p] = std::max(tree[p], std::make_pair(best[k], static_cast<int>(k)));
  }
  std::vector<int> chain;
  for (int k = static_cast<int>(std::max_element(best.begin(), best.end()) - best.begin()); k >= 0; k = prev[k]) chain.push_back(ids[k]);
  std::reverse(chain.begin(), chain.end());
  return chain;
}

// split_at_peaks: below this many splits a range is placed by best fit only.
constexpr int kSplitDepth = 48;

// Places `ids` (offsets -1, lifetimes within a range where the buffers placed already are the
// only others live) below `limit` (no less than `load`, the live bytes, at any step) if it can: best fit in pack_intervals' three orders among the
// placed buffers they meet; when that goes above `limit`, the buffers live at the heaviest step
// of the range are stacked in the largest free piece there (the heaviest nested chain upward from
// its bottom, the next heaviest downward from its top, the rest, latest end first, below the
// first chain with `rest_lowest`, else on it) and the buffers before and after that step, which
// never meet, are placed the same way each, with the stack fixed. The lower of the two is kept
// (docs/MEMORY.md "Exact placement").
void split_at_peaks(const std::vector<Buffer>& items, std::vector<int64_t>& offsets, const std::vector<int>& ids,
                    const std::vector<int>& around, const std::vector<int64_t>& load, int64_t limit, bool rest_lowest, int depth) {
  if (ids.empty()) return;
  int lo = items[ids[0]].start, hi = items[ids[0]].end;
  for (int i : ids) lo = std::min(lo, items[i].start), hi = std::max(hi, items[i].end);
  // The placed buffers met: among `around` (those placed by the calls above this one; the other
  // side's buffers, placed meanwhile, never meet these).
  std::vector<int> placed;
  for (int i : around)
    if (offsets[i] >= 0 && items[i].start <= hi && items[i].end >= lo) placed.push_back(i);
  auto top_of = [&](const std::vector<int64_t>& off) {
    int64_t top = 0;
    for (int i : ids) top = std::max(top, off[i] + size_of(items[i]));
    return top;
  };
  // Best fit among the placed buffers met (a copy of them and the ids), the first order below
  // `limit` or the lowest; at depth 0 (every buffer, none placed) placement_starts' own best fit,
  // above the bound when this runs, is not repeated.
  std::vector<Buffer> sub;
  for (int i : placed) sub.push_back(items[i]);
  for (int i : ids) sub.push_back(items[i]);
  std::vector<int64_t> fit;
  int64_t fit_top = INT64_MAX;
  for (PackOrder by : {PackOrder::size, PackOrder::lifetime, PackOrder::area}) {
    if (depth == 0 || fit_top <= limit) break;
    std::vector<int64_t> off(sub.size(), -1);
    for (size_t k = 0; k < placed.size(); ++k) off[k] = offsets[placed[k]];
    pack_intervals(sub, off, by);
    int64_t top = 0;
    for (size_t k = placed.size(); k < sub.size(); ++k) top = std::max(top, off[k] + size_of(sub[k]));
    if (top < fit_top) fit_top = top, fit = std::move(off);
  }
  auto take_fit = [&] {
    for (size_t k = 0; k < ids.size(); ++k) offsets[ids[k]] = fit[placed.size() + k];
  };
  if (fit_top <= limit || depth == kSplitDepth) return take_fit();
  // The heaviest step where one of the ids lives (the first of equals).
  std::vector<int> live_ids(static_cast<size_t>(hi - lo + 2), 0);  // (a difference array)
  for (int i : ids) ++live_ids[items[i].start - lo], --live_ids[items[i].end - lo + 1];
  int peak = -1;
  for (int t = lo, n = 0; t <= hi; ++t)
    if ((n += live_ids[t - lo]) > 0 && (peak < 0 || load[t] > load[peak])) peak = t;
  std::vector<int> at_peak, before, after;
  for (int i : ids) (items[i].end < peak ? before : items[i].start > peak ? after : at_peak).push_back(i);
  // The largest free piece at the peak below `limit`.
  std::vector<std::pair<int64_t, int64_t>> taken;
  for (int i : placed)
    if (live_at(items[i], peak)) taken.emplace_back(offsets[i], offsets[i] + size_of(items[i]));
  std::sort(taken.begin(), taken.end());
  int64_t a = 0, b = 0, cursor = 0;
  auto gap = [&](int64_t from, int64_t to) {
    if (to - from > b - a) a = from, b = to;
  };
  for (const auto& [from, to] : taken) gap(cursor, std::min(from, limit)), cursor = std::max(cursor, to);
  gap(cursor, limit);
  // (There is one: the placed buffers live at the peak and the ids live there, at least one, fit
  // in `limit`, the bound of every step's load, so the placed ones cannot cover all of it.)
  MNEMO_ASSERT(b > a) << "split_at_peaks: no room below " << limit << " at step " << peak;
  // The chains, and the rest (latest end first).
  std::vector<int> first = nested_chain(items, at_peak), second, rest;
  auto others = [&](const std::vector<int>& from, const std::vector<int>& chain) {
    std::vector<int> sorted = chain, left;
    std::sort(sorted.begin(), sorted.end());
    for (int i : from)
      if (!std::binary_search(sorted.begin(), sorted.end(), i)) left.push_back(i);
    return left;
  };
  rest = others(at_peak, first);
  if (!rest.empty()) second = nested_chain(items, rest), rest = others(rest, second);
  std::stable_sort(rest.begin(), rest.end(), [&](int x, int y) { return latest_end_first(items[x], items[y]); });
  const int64_t up = rest_lowest ? stack_up(items, first, offsets, stack_up(items, rest, offsets, a))
                                 : stack_up(items, rest, offsets, stack_up(items, first, offsets, a));
  // The second chain downward from the piece's top: stacked upward from where it must begin.
  std::reverse(second.begin(), second.end());
  int64_t stacked = 0;
  for (int i : second) stacked += size_of(items[i]);
  stack_up(items, second, offsets, std::max(b, up + stacked) - stacked);  // (on the first when the piece is too small)
  // The piece is free at the peak only: a stacked buffer that meets a placed one (elsewhere in its
  // lifetime, or at the peak when the piece was too small) is placed by best fit after the others.
  std::vector<int> clash;
  for (int i : at_peak)
    for (int j : placed)
      if (items[i].start <= items[j].end && items[j].start <= items[i].end && offsets[i] < offsets[j] + size_of(items[j]) &&
          offsets[j] < offsets[i] + size_of(items[i])) {
        clash.push_back(i);
        break;
      }
  for (int i : clash) offsets[i] = -1;
  std::vector<int> inner = placed;
  inner.insert(inner.end(), at_peak.begin(), at_peak.end());
  split_at_peaks(items, offsets, before, inner, load, limit, rest_lowest, depth + 1);
  split_at_peaks(items, offsets, after, inner, load, limit, rest_lowest, depth + 1);
  if (!clash.empty()) {
    std::vector<int> meet = placed;
    meet.insert(meet.end(), ids.begin(), ids.end());
    std::vector<Buffer> all;
    std::vector<int64_t> off;
    for (int i : meet) all.push_back(items[i]), off.push_back(offsets[i]);
    pack_intervals(all, off, PackOrder::size);
    for (size_t k = 0; k < meet.size(); ++k) offsets[meet[k]] = off[k];
  }
  if (fit_top < top_of(offsets)) take_fit();
}

}  // namespace

// Best fit in pack_intervals' three orders, then two starts built around the heaviest step (the
// first of equal ones): the buffers live there stacked from offset 0 in one of two orders, the
// others by best fit around them (in whichever of pack_intervals' three orders gives the least
// arena). In a training step most buffers live at the peak are values saved for backward, made
// in forward order and freed in the reverse order: nested lifetimes, which a stack keeps in one
// piece at every step (a buffer's neighbours above it die before it), so the others find their
// room above it. The orders differ on the buffers that are not nested:
//   - the longest lived lowest (earlier start first on ties): a gradient living from the peak
//     to late in backward must not sit on top. On ResNet-152's budget=0.5x plan this start is at
//     the live-bytes bound as it is, where the searches from best fit stopped 0.02% above it
//     after 5 s (the BatchNorm statistics, tiny and live through the whole step, ended on top).
//   - the latest end lowest (earlier start first on ties): the buffers that die first after the
//     peak are on top, so the room they leave is one piece at the top, where the buffers made
//     after the peak go. On the budget=0.3x plan of a ResNet of 5005 forward nodes (blocks
//     3/40/131/3, 9463 buffers) and the fused LSTM's and NASNet's sublinear plans it is at the
//     bound as it is; the first stack was 0.13%, 0.88% and 1.06% above it, and the searches
//     stopped 0.016%, 0.19% and 0.03-0.27% above it after 5 s. (Tried and not kept: the others
//     placed outward from the peak, workspaces first, then nearest the peak first: at the bound
//     on the 5005-node plan but on none that this start misses; stacking by start: 50% larger
//     arenas.)
// Then, with `always_split` or when none of these is at the bound, the two splits at the peaks
// (split_at_peaks, from nothing, the rest lowest or on the first chain).
std::vector<PlacementStart> placement_starts(const std::vector<Buffer>& items, bool always_split) {
  if (items.empty()) return {};
  Liveness l;
  l.buffers = items;
  const std::vector<int64_t> load = live_bytes_per_step(l, true);
  const int peak = heaviest_step(load);
  std::vector<int> at_peak;
  for (size_t i = 0; i < items.size(); ++i)
    if (live_at(items[i], peak)) at_peak.push_back(static_cast<int>(i));
  // Best fit in pack_intervals' three orders, from nothing and from each stack: nine packings,
  // on the threads.
  auto stack_of = [&](auto lower) {
    std::vector<int> order = at_peak;
    std::stable_sort(order.begin(), order.end(), [&](int a, int b) { return lower(items[a], items[b]); });
    std::vector<int64_t> stack(items.size(), -1);
    stack_up(items, order, stack, 0);
    return stack;
  };
  const std::vector<std::vector<int64_t>> from = {
      std::vector<int64_t>(items.size(), -1),
      stack_of([](const Buffer& a, const Buffer& b) {
        return a.end - a.start != b.end - b.start ? a.end - a.start > b.end - b.start : a.start < b.start;
      }),
      stack_of(latest_end_first)};
  constexpr PackOrder kOrders[] = {PackOrder::size, PackOrder::lifetime, PackOrder::area};
  std::vector<std::vector<int64_t>> packed(3 * from.size());
  std::vector<int64_t> arena(packed.size());
  parallel_each(packed.size(), [&](size_t k) {
    packed[k] = from[k / 3];
    arena[k] = pack_intervals(items, packed[k], kOrders[k % 3]);
  });
  std::vector<PlacementStart> starts;
  const char* best_fit[] = {"best fit, largest first", "best fit, longest lived first", "best fit, largest bytes x steps first"};
  for (size_t k = 0; k < 3; ++k) starts.push_back({best_fit[k], std::move(packed[k])});
  // Each stack: the best of its three (the first on ties).
  const char* stacked[] = {"stacked at the peak, longest lived lowest", "stacked at the peak, latest end lowest"};
  for (size_t s = 1; s < from.size(); ++s) {
    size_t best = 3 * s;
    for (size_t k = 3 * s + 1; k < 3 * s + 3; ++k)
      if (arena[k] < arena[best]) best = k;
    starts.push_back({stacked[s - 1], std::move(packed[best])});
  }
  // The splits, when asked for or when none of these is at the bound.
  if (!always_split && *std::min_element(arena.begin(), arena.end()) <= load[peak]) return starts;
  std::vector<std::vector<int64_t>> split(2, std::vector<int64_t>(items.size(), -1));
  std::vector<int> all(items.size());
  std::iota(all.begin(), all.end(), 0);
  parallel_each(split.size(), [&](size_t k) { split_at_peaks(items, split[k], all, {}, load, load[peak], k == 0, 0); });
  starts.push_back({"split at the peaks, the rest lowest", std::move(split[0]), true});
  starts.push_back({"split at the peaks, the rest on the first chain", std::move(split[1]), true});
  return starts;
}

}  // namespace mnemo
