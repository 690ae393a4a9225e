// Exact and improved placement of buffers in the arena (see placement.h).
#include "memory/placement.h"

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cmath>
#include <numeric>

#include <omp.h>

#include "core/error.h"
#include "core/memory_plan.h"
#include "memory/parallel.h"
#include "memory/placement_util.h"
#include "memory/planner.h"

namespace mnemo {

using namespace placing;

namespace {

// The buffers the first neighbourhood frees (doubled each time it is searched through in vain).
constexpr size_t kFirstFreed = 24;
// Buffers below 1/kSmallShare of the live bytes are packed after the others (place_exactly).
constexpr int64_t kSmallShare = 4096;
// small_on_top's second line between the buffers placed exactly and those stacked on top of them
// (the first is kSmallShare), tried when the first does not reach the bound: a buffer of a few KiB
// live at the peak then goes on top with the statistics and status words instead of holding the
// large ones above their own bound. lstm-fashion-mnist's share step in the greedy order (a 14 KiB
// and a 2 KiB buffer live at its peak, 1/1800 and 1/13000 of 26 MB) stopped 6 KiB above the bound
// after 5 s with 1/4096 alone, and is at the bound in 2.6 s with both. With the wider line alone
// the greedy order's Inception-v3 and lstm-paper share plans stopped above the bound after 5 s
// (docs/BENCHMARKS.md "The small buffers on top: a second, wider line").
constexpr int64_t kSmallOnTopShare = 1024;
// The whole problem is searched when it has at most this many buffers.
constexpr size_t kWholeBuffers = 400;
// Lower bounds: at most this many windows, each of at most this many buffers.
constexpr int kWindows = 8;
constexpr size_t kWindowBuffers = 24;
constexpr int64_t kSmallFraction = 64;
// place_exactly: the share of the time for a first, short search from each start.
constexpr double kQuickShare = 0.1;  // windows leave out buffers below 1/64 of their centre's load

// The branch and bound over placement sequences (placement.h) for the buffers `freed`. Time is
// compressed to the distinct start steps of the freed buffers: two buffers meet exactly when one's
// start lies in the other's lifetime, and the skyline (the top of the placed buffers) only rises
// at those steps.
class Search {
 public:
  // Places `freed`; with `obstacles` the other buffers stay at `offsets` and the freed ones avoid
  // those they meet; without, the others are left out (a relaxation: the least arena of a subset
  // is a lower bound of the whole's). Looks for arenas below `best`.
  // It stops at the deadline or when `cancel` (if given) is set.
  Search(const std::vector<Buffer>& items, const std::vector<int64_t>& offsets, const std::vector<int>& freed, bool obstacles,
         int64_t best, double seconds, const std::atomic<bool>* cancel)
      : cancel_(cancel),
        deadline_(std::chrono::steady_clock::now() + std::chrono::duration_cast<std::chrono::steady_clock::duration>(
                                                          std::chrono::duration<double>(seconds))),
        best_(best) {
    // Points: the start steps of the freed buffers that some freed buffer is live at (two buffers
    // meet exactly when one's start lies in the other's lifetime, and a freed buffer only meets
    // others at points it covers).
    std::vector<int> points;
    for (int i : freed) points.push_back(items[i].start);
    std::sort(points.begin(), points.end());
    points.erase(std::unique(points.begin(), points.end()), points.end());
    auto first_point = [&](int step) { return static_cast<int>(std::lower_bound(points.begin(), points.end(), step) - points.begin()); };
    auto last_point = [&](int step) { return static_cast<int>(std::upper_bound(points.begin(), points.end(), step) - points.begin()) - 1; };
    const size_t np = points.size();
    skyline_.assign(np, 0);
    remaining_.assign(np, 0);
    // Largest first, then earliest: the order of ties (equal offsets) and of the first dive.
    std::vector<int> order = freed;
    std::stable_sort(order.begin(), order.end(), [&](int a, int b) {
      if (size_of(items[a]) != size_of(items[b])) return size_of(items[a]) > size_of(items[b]);
      return items[a].start < items[b].start;
    });
    std::vector<char> is_freed(items.size(), 0);
    for (int i : order) {
      is_freed[i] = 1;
      ids_.push_back(i);
      size_.push_back(size_of(items[i]));
      lo_.push_back(first_point(items[i].start));
      hi_.push_back(last_point(items[i].end));
      for (int p = lo_.back(); p <= hi_.back(); ++p) remaining_[p] += size_.back();
    }
    obstacles_at_.resize(np);
    obstacles_of_.resize(ids_.size());
    if (obstacles) {
      for (size_t j = 0; j < items.size(); ++j) {
        if (is_freed[j]) continue;
        const Span o{offsets[j], offsets[j] + size_of(items[j])};
        top_ = std::max(top_, o.end);
        for (int p = first_point(items[j].start); p <= last_point(items[j].end); ++p) obstacles_at_[p].push_back(o);
      }
      for (size_t k = 0; k < ids_.size(); ++k) {
        for (size_t j = 0; j < items.size(); ++j)
          if (!is_freed[j] && items[j].start <= items[ids_[k]].end && items[ids_[k]].start <= items[j].end)
            obstacles_of_[k].push_back({offsets[j], offsets[j] + size_of(items[j])});
        std::sort(obstacles_of_[k].begin(), obstacles_of_[k].end());
      }
    }
    placed_.assign(ids_.size(), 0);
    base_.assign(np, 0);
    at_.assign(ids_.size(), -1);
    best_at_.assign(ids_.size(), -1);
  }

  // Depth-first; true when it ran to the end (best() is then the least arena of the neighbourhood).
  bool run() {
    if (top_ < best_) dive(0, -1, 0, top_);
    return !stopped_;
  }
  int64_t best() const { return best_; }
  bool improved() const { return !ids_.empty() && best_at_.front() >= 0; }
  // Offsets of the best packing found (only when improved()).
  void write(std::vector<int64_t>& offsets) const {
    for (size_t k = 0; k < ids_.size(); ++k) offsets[ids_[k]] = best_at_[k];
  }
  int64_t nodes() const { return nodes_; }

 private:
  struct Span {
    int64_t offset, end;
    bool operator<(const Span& o) const { return offset != o.offset ? offset < o.offset : end < o.end; }
  };
  // The lowest offset on the skyline of the placed buffers that clears the obstacles.
  int64_t offset_of(size_t k) const {
    int64_t o = 0;
    for (int p = lo_[k]; p <= hi_[k]; ++p) o = std::max(o, skyline_[p]);
    for (const Span& b : obstacles_of_[k]) {
      if (b.offset >= o + size_[k]) break;
      o = std::max(o, b.end);
    }
    return o;
  }
  void dive(size_t depth, int last, int64_t floor, int64_t top) {
    if (stopped_) return;
    // (checked every 64 nodes: a node can cost milliseconds)
    if ((++nodes_ & 63) == 0 && (std::chrono::steady_clock::now() > deadline_ || (cancel_ && cancel_->load(std::memory_order_relaxed)))) {
      stopped_ = true;
      return;
    }
    if (depth == ids_.size()) {
      if (top < best_) best_ = top, best_at_ = at_;
      return;
    }
    // Each remaining buffer lies at or above its offset now (the skyline only rises) and at or
    // above `floor`; at each point the remaining buffers live there stack up from the lowest of
    // those, beside the obstacles above it: a lower bound of any completion.
    std::vector<std::pair<int64_t, int>> children;
    std::fill(base_.begin(), base_.end(), INT64_MAX);
    for (size_t k = 0; k < ids_.size(); ++k) {
      if (placed_[k]) continue;
      const int64_t o = offset_of(k);
      for (int p = lo_[k]; p <= hi_[k]; ++p) base_[p] = std::min(base_[p], std::max(o, floor));
      // Children: the buffers whose offset is at least the last one's; at the same offset only
      // in increasing rank (they do not meet: either order gives the same packing).
      if (o < floor || (o == floor && static_cast<int>(k) < last)) continue;
      if (std::max(top, o + size_[k]) >= best_) continue;
      children.emplace_back(o, static_cast<int>(k));
    }
    for (size_t p = 0; p < base_.size(); ++p) {
      if (!remaining_[p]) continue;
      int64_t need = base_[p] + remaining_[p];
      for (const Span& b : obstacles_at_[p]) need += std::max<int64_t>(0, b.end - std::max(b.offset, base_[p]));
      if (need >= best_) return;
    }
    std::sort(children.begin(), children.end());
    std::vector<int64_t> saved;
    for (const auto& [o, k] : children) {
      saved.assign(skyline_.begin() + lo_[k], skyline_.begin() + hi_[k] + 1);
      for (int p = lo_[k]; p <= hi_[k]; ++p) skyline_[p] = std::max(skyline_[p], o + size_[k]), remaining_[p] -= size_[k];
      placed_[k] = 1, at_[k] = o;
      dive(depth + 1, k, o, std::max(top, o + size_[k]));
      placed_[k] = 0, at_[k] = -1;
      for (int p = lo_[k]; p <= hi_[k]; ++p) skyline_[p] = saved[p - lo_[k]], remaining_[p] += size_[k];
      if (stopped_) return;
    }
  }

  const std::atomic<bool>* cancel_;
  std::chrono::steady_clock::time_point deadline_;
  int64_t best_, top_ = 0;
  std::vector<int> ids_, lo_, hi_;
  std::vector<int64_t> size_, skyline_, remaining_, base_, at_, best_at_;
  std::vector<std::vector<Span>> obstacles_at_, obstacles_of_;
  std::vector<char> placed_;
  int64_t nodes_ = 0;
  bool stopped_ = false;
};

}  // namespace

const char* placement_status(int64_t arena, int64_t live_bytes, int64_t bound) {
  return arena <= live_bytes ? "at the live-bytes bound" : arena <= bound ? "optimal" : "time limit";
}

int64_t checked_arena(const std::vector<Buffer>& items, const std::vector<int64_t>& offsets) {
  MNEMO_CHECK(offsets.size() == items.size()) << "placement: " << offsets.size() << " offsets for " << items.size() << " buffers";
  std::vector<int> by_start(items.size());
  std::iota(by_start.begin(), by_start.end(), 0);
  std::sort(by_start.begin(), by_start.end(), [&](int a, int b) { return items[a].start < items[b].start; });
  int64_t top = 0;
  for (size_t a = 0; a < by_start.size(); ++a) {
    const int i = by_start[a];
    MNEMO_CHECK(offsets[i] >= 0 && offsets[i] % kArenaAlignment == 0) << "placement: buffer " << i << " at offset " << offsets[i];
    top = std::max(top, offsets[i] + size_of(items[i]));
    for (size_t b = a + 1; b < by_start.size() && items[by_start[b]].start <= items[i].end; ++b) {
      const int j = by_start[b];
      MNEMO_CHECK(offsets[i] + size_of(items[i]) <= offsets[j] || offsets[j] + size_of(items[j]) <= offsets[i])
          << "placement: buffers " << i << " and " << j << " overlap while both live";
    }
  }
  return top;
}

namespace {

PlacementReport place_core(const std::vector<Buffer>& items, std::vector<int64_t>& offsets, int64_t live_bytes, double seconds,
                           const std::atomic<bool>* cancel) {
  const auto t0 = std::chrono::steady_clock::now();
  auto elapsed = [&] { return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count(); };
  const size_t n = items.size();
  PlacementReport rep;
  auto top_of = [&](size_t i) { return offsets[i] + size_of(items[i]); };
  for (size_t i = 0; i < n; ++i) rep.start_bytes = std::max(rep.start_bytes, top_of(i));
  rep.arena_bytes = rep.start_bytes;
  rep.bound_bytes = std::min(live_bytes, rep.start_bytes);
  if (rep.arena_bytes <= live_bytes) return rep;
  auto done = [&] { return rep.arena_bytes <= rep.bound_bytes || (cancel && cancel->load(std::memory_order_relaxed)); };
  // Points: the distinct start steps (two buffers meet exactly when they share one).
  std::vector<int> points;
  for (const Buffer& b : items) points.push_back(b.start);
  std::sort(points.begin(), points.end());
  points.erase(std::unique(points.begin(), points.end()), points.end());
  const int np = static_cast<int>(points.size());
  std::vector<int> lo(n), hi(n);
  std::vector<int64_t> load(np, 0);
  for (size_t i = 0; i < n; ++i) {
    lo[i] = static_cast<int>(std::lower_bound(points.begin(), points.end(), items[i].start) - points.begin());
    hi[i] = static_cast<int>(std::upper_bound(points.begin(), points.end(), items[i].end) - points.begin()) - 1;
    for (int p = lo[i]; p <= hi[i]; ++p) load[p] += size_of(items[i]);
  }
  // The buffers meeting points [l, r] of at least `least` bytes.
  auto meeting = [&](int l, int r, int64_t least) {
    std::vector<int> s;
    for (size_t i = 0; i < n; ++i)
      if (lo[i] <= r && hi[i] >= l && size_of(items[i]) >= least) s.push_back(static_cast<int>(i));
    return s;
  };
  // Grows points [c, c] toward the side where `weight` is larger while at most `limit` buffers of
  // at least `least` bytes meet them (counted as it grows: widening to the left adds the buffers
  // ending at the new point, to the right those starting there).
  std::vector<std::vector<int>> ending(np), starting(np);
  for (size_t i = 0; i < n; ++i) ending[hi[i]].push_back(static_cast<int>(i)), starting[lo[i]].push_back(static_cast<int>(i));
  auto window = [&](int c, const std::vector<int64_t>& weight, size_t limit, int64_t least) {
    int l = c, r = c;
    size_t count = meeting(c, c, least).size();
    for (;;) {
      const bool left = l > 0 && (r + 1 >= np || weight[l - 1] >= weight[r + 1]);
      if (!left && r + 1 >= np) break;
      size_t more = 0;
      for (int i : left ? ending[l - 1] : starting[r + 1]) more += size_of(items[i]) >= least;
      if (count + more > limit) break;
      count += more;
      if (left) --l; else ++r;
    }
    return std::make_pair(l, r);
  };
  // 1. A better packing, by complete searches of neighbourhoods, the other buffers staying where
  // they are: (0) the buffers reaching highest (whole groups of equal tops); (1) those meeting the
  // points around a point where the arena's top is reached (the heaviest first; the next one after
  // a search ran out of time); (2) when neither improves, the highest buffers over the lifetimes
  // of those on top at the heaviest such point. Each neighbourhood starts with a few buffers, more
  // each time (0) and (1) are searched through in vain. Up to 40% of the time (85% when step 3
  // does not run).
  const double improve_until = (n <= kWholeBuffers ? 0.4 : 0.85) * seconds;
  size_t want = std::min<size_t>(n, kFirstFreed);
  std::vector<char> tried(np, 0);  // centres whose window ran out of time since the last improvement
  struct { int centre = -1; size_t want = 0; int64_t arena = -1; } fruitless;  // (2)'s last vain search
  // The top of the placed buffers at each point, and the heaviest point where it is the arena's
  // (-1: none; with `untried`, only among the centres not tried yet).
  auto columns = [&] {
    std::vector<int64_t> column(np, 0);
    for (size_t i = 0; i < n; ++i)
      for (int p = lo[i]; p <= hi[i]; ++p) column[p] = std::max(column[p], top_of(i));
    return column;
  };
  auto heaviest_top = [&](const std::vector<int64_t>& column, bool untried) {
    int c = -1;
    for (int p = 0; p < np; ++p)
      if (column[p] == rep.arena_bytes && !(untried && tried[p]) && (c < 0 || load[p] > load[c])) c = p;
    return c;
  };
  while (!done() && want < n && elapsed() < improve_until) {
    bool improved = false, complete = true;
    // (each kind checks the clock: a search set up after the time is up still pays for its setup,
    // tens of milliseconds on thousands of buffers, and the placement's limit was overrun by up
    // to 0.86 s on 5 s before)
    for (int kind = 0; kind < 3 && !done() && elapsed() < improve_until; ++kind) {
      std::vector<int> freed;
      int centre = -1;
      if (kind == 0) {
        std::vector<int> by_top(n);
        std::iota(by_top.begin(), by_top.end(), 0);
        std::stable_sort(by_top.begin(), by_top.end(), [&](int a, int b) { return top_of(a) > top_of(b); });
        size_t cut = want;
        while (cut < n && top_of(by_top[cut]) == top_of(by_top[cut - 1])) ++cut;
        freed.assign(by_top.begin(), by_top.begin() + static_cast<std::ptrdiff_t>(cut));
      } else if (kind == 1) {
        const std::vector<int64_t> column = columns();
        centre = heaviest_top(column, true);
        if (centre < 0) continue;
        // The points around it while at most `want` buffers meet them; when more meet the point
        // itself, its `want` largest.
        const auto [l, r] = window(centre, column, want, 0);
        freed = meeting(l, r, 0);
        if (freed.size() > want) {
          std::stable_sort(freed.begin(), freed.end(), [&](int a, int b) { return size_of(items[a]) > size_of(items[b]); });
          freed.resize(want);
        }
      } else {
        if (improved) continue;  // only when the other two found nothing this round
        // A buffer on top can only come down into a gap below it if the buffers above that gap
        // during its lifetime move too (the largest meeting one point, (1), are mostly others).
        const int c = heaviest_top(columns(), false);
        if (c < 0 || (c == fruitless.centre && want == fruitless.want && rep.arena_bytes == fruitless.arena)) continue;
        fruitless = {c, want, rep.arena_bytes};  // (the same search again would find nothing; an improvement changes the arena)
        int l = c, r = c;
        for (size_t i = 0; i < n; ++i)
          if (lo[i] <= c && hi[i] >= c && top_of(i) == rep.arena_bytes) l = std::min(l, lo[i]), r = std::max(r, hi[i]);
        freed = meeting(l, r, 0);
        std::stable_sort(freed.begin(), freed.end(), [&](int a, int b) { return top_of(a) > top_of(b); });
        if (freed.size() > want) freed.resize(want);
      }
      if (freed.size() >= n) continue;  // the whole problem: step 3
      Search search(items, offsets, freed, true, rep.arena_bytes, std::min(0.1 * seconds, improve_until - elapsed()), cancel);
      const bool ran_through = search.run();
      if (search.improved()) {
        search.write(offsets);
        rep.arena_bytes = search.best();
        rep.improved = improved = true;
        std::fill(tried.begin(), tried.end(), 0);
      } else if (!ran_through && kind < 2) {  // ((2), a last try, does not hold back the doubling)
        complete = false;
        if (centre >= 0) tried[centre] = 1;
      }
    }
    if (!improved && complete) want = std::min(n, 2 * want);
    if (!improved && !complete && std::find(tried.begin(), tried.end(), 0) == tried.end()) break;
  }
  // 2. A lower bound: the largest buffers meeting a window of points around each of the highest
  // loads (leaving out those below 1/64 of its load keeps the search small and costs the bound
  // little), a subset small enough for a complete search; its least arena bounds the whole's.
  // Up to 70% of the time.
  std::vector<int> centres(np);
  std::iota(centres.begin(), centres.end(), 0);
  std::stable_sort(centres.begin(), centres.end(), [&](int a, int b) { return load[a] > load[b]; });
  std::vector<char> covered(np, 0);
  int windows = 0;
  for (int c : centres) {
    if (done() || windows == kWindows || elapsed() >= (n <= kWholeBuffers ? 0.7 : 1.0) * seconds) break;
    if (covered[c]) continue;
    const int64_t least = load[c] / kSmallFraction;
    const auto [l, r] = window(c, load, kWindowBuffers, least);
    for (int p = l; p <= r; ++p) covered[p] = 1;
    ++windows;
    const std::vector<int> subset = meeting(l, r, least);
    Search search(items, offsets, subset, false, rep.arena_bytes, ((n <= kWholeBuffers ? 0.7 : 1.0) * seconds - elapsed()) / 2, cancel);
    const bool complete = search.run();
    if (complete) rep.bound_bytes = std::max(rep.bound_bytes, search.best());
  }
  // 3. The whole problem, for the rest of the time, when it is small enough for the search to
  // get anywhere: a complete search proves its best optimal.
  if (!done() && n <= kWholeBuffers && elapsed() < seconds) {
    std::vector<int> all(n);
    std::iota(all.begin(), all.end(), 0);
    Search search(items, offsets, all, false, rep.arena_bytes, seconds - elapsed(), cancel);
    const bool complete = search.run();
    if (search.improved()) {
      search.write(offsets);
      rep.arena_bytes = search.best();
      rep.improved = true;
    }
    if (complete) rep.bound_bytes = rep.arena_bytes;
  }
  rep.bound_bytes = std::min(rep.bound_bytes, rep.arena_bytes);
  rep.seconds = elapsed();
  return rep;
}

PlacementReport place_from(const std::vector<Buffer>& items, std::vector<int64_t>& offsets, int64_t live_bytes, double seconds,
                           const std::atomic<bool>* cancel) {
  // The small buffers (below 1/4096 of the live bytes: BatchNorm statistics, status words) are
  // many in large graphs and lie anywhere; the searches first place the others (up to 60% of the
  // time), the small ones are then packed into the gaps by best fit, and what is left of the time
  // goes to searches over every buffer. The large ones' bound holds for all (a subset's).
  const auto t0 = std::chrono::steady_clock::now();
  auto elapsed = [&] { return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count(); };
  Subset large = subset(items, offsets, at_least(items, live_bytes / kSmallShare));
  if (large.ids.size() == items.size()) return place_core(items, offsets, live_bytes, seconds, cancel);
  const PlacementReport part = place_core(large.items, large.offsets, large.live_bytes, 0.6 * seconds, cancel);
  PlacementReport rep;
  rep.start_bytes = arena_top(items, offsets);
  rep.arena_bytes = rep.start_bytes;
  if (part.improved) {
    std::vector<int64_t> all(items.size(), -1);
    large.into(all);
    const int64_t arena = pack_intervals(items, all);
    if (arena < rep.start_bytes) offsets = std::move(all), rep.arena_bytes = arena, rep.improved = true;
  }
  rep.bound_bytes = std::min(rep.arena_bytes, std::max(part.bound_bytes, live_bytes));
  if (rep.arena_bytes > rep.bound_bytes && elapsed() < seconds) {
    const PlacementReport whole = place_core(items, offsets, rep.bound_bytes, seconds - elapsed(), cancel);
    rep.improved |= whole.improved;
    rep.arena_bytes = whole.arena_bytes;
    rep.bound_bytes = std::min(rep.arena_bytes, std::max(rep.bound_bytes, whole.bound_bytes));
  }
  rep.seconds = elapsed();
  return rep;
}

// The small buffers (those not in `large`, the buffers of at least 1/line of the live bytes:
// BatchNorm statistics, status words) left out, the others placed exactly (place_exactly on them alone, within `seconds`), then the
// small ones live at the heaviest step stacked on top of them (the latest end lowest) and the
// others by best fit. When the large ones are at their own bound they leave no gap at that step
// and the small ones fill the rest of it exactly, which best fit into the gaps does not. A small
// buffer not live at that step that best fit leaves above the bound joins the ones placed exactly
// in a second round (with twice the time): Inception-v3's step at batch 32 in the greedy order,
// where two 1280-byte buffers living 64 steps just after the peak found no gap 1280 bytes wide
// for all their steps between the large ones, and placed with them reach the bound. Empty when
// there are no small buffers (or only small ones), and inside its own place_exactly calls.
std::vector<int64_t> small_on_top(const std::vector<Buffer>& items, const std::vector<int64_t>& offsets, int64_t live_bytes,
                                  const std::vector<int>& large, double seconds) {
  thread_local int depth = 0;  // the rounds' place_exactly has small buffers of its own: no deeper call
  if (depth > 0) return {};
  struct Nested {
    Nested() { ++depth; }
    ~Nested() { --depth; }
  } nested;
  std::vector<char> exact(items.size(), 0);
  if (large.empty() || large.size() == items.size()) return {};
  for (int i : large) exact[i] = 1;
  Liveness l;
  l.buffers = items;
  const int peak = heaviest_step(live_bytes_per_step(l, true));
  std::vector<int64_t> best;
  for (int round = 0; round < 2; ++round) {
    std::vector<int> ids;
    for (size_t i = 0; i < items.size(); ++i)
      if (exact[i]) ids.push_back(static_cast<int>(i));
    Subset sub = subset(items, offsets, std::move(ids));
    place_exactly(sub.items, sub.offsets, sub.live_bytes, round == 0 ? seconds : 2 * seconds);
    std::vector<int64_t> all(items.size(), -1);
    sub.into(all);
    std::vector<int> stack;
    for (size_t i = 0; i < items.size(); ++i)
      if (!exact[i] && live_at(items[i], peak)) stack.push_back(static_cast<int>(i));
    std::stable_sort(stack.begin(), stack.end(), [&](int x, int y) { return latest_end_first(items[x], items[y]); });
    stack_up(items, stack, all, arena_top(sub.items, sub.offsets));
    pack_intervals(items, all);
    if (best.empty() || arena_top(items, all) < arena_top(items, best)) best = all;
    if (arena_top(items, best) <= live_bytes) break;
    bool moved = false;
    for (size_t i = 0; i < items.size(); ++i)
      if (!exact[i] && !live_at(items[i], peak) && all[i] + size_of(items[i]) > live_bytes) exact[i] = 1, moved = true;
    if (!moved) break;
  }
  return best;
}

}  // namespace

PlacementReport place_exactly(const std::vector<Buffer>& items, std::vector<int64_t>& offsets, int64_t live_bytes, double seconds) {
  // The searches improve a packing locally, and which start they get furthest from differs
  // (ResNet-101's sublinear plan: from 907 MiB by size to 870 MiB, from 932 MiB by lifetime to
  // 858.5 MiB; the live bytes are 853.8 MiB): the packing given, then best fit in the three
  // orders of pack_intervals, then the two starts stacked at the peak (placement_starts; and the
  // splits and the small buffers on top when lower than every other start), each
  // gets an equal share of the time left; a bound proven on one holds for all (the same
  // buffers), and the first arena at the bound ends it. (Half the time split and the rest to the
  // start that got lowest: 59 of 78 plans at the bound instead of 65.)
  const auto t0 = std::chrono::steady_clock::now();
  auto elapsed = [&] { return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count(); };
  std::vector<std::vector<int64_t>> starts = {offsets};
  std::vector<PlacementStart> more = placement_starts(items, false);
  // The splits are searched from only when lower than every other start (each start searched
  // from gets a share of the time: lstm-fashion-mnist's share plan took 1.95 s instead of 1.17
  // to reach the bound with them always in).
  int64_t lowest = arena_top(items, offsets);
  for (const PlacementStart& st : more)
    if (!st.only_if_lowest) lowest = std::min(lowest, arena_top(items, st.offsets));
  for (PlacementStart& st : more)
    if ((!st.only_if_lowest || arena_top(items, st.offsets) < lowest) && std::find(starts.begin(), starts.end(), st.offsets) == starts.end())
      starts.push_back(std::move(st.offsets));
  PlacementReport rep;
  rep.start_bytes = arena_top(items, offsets);
  rep.arena_bytes = rep.start_bytes;
  // A start at the live-bytes bound as it is (the stacks often are) is optimal: the first one
  // is taken without a search (ResNet-152's budget=0.5x plan: the searches from the other starts,
  // running beside it until it stopped them, took 0.04 s).
  auto at_bound = [&](std::vector<int64_t>& st) {
    const int64_t top = arena_top(items, st);
    if (top > live_bytes) return false;
    offsets = std::move(st);
    rep.arena_bytes = rep.bound_bytes = top;
    rep.improved = top < rep.start_bytes;
    rep.status = placement_status(rep.arena_bytes, live_bytes, rep.bound_bytes);
    rep.seconds = elapsed();
    return true;
  };
  for (std::vector<int64_t>& st : starts)
    if (at_bound(st)) return rep;
  // The small buffers placed last, on top (small_on_top), with up to a tenth of the time: taken
  // when at the bound, else searched from when lower than every other start (ResNet-101's and
  // Inception-v3's sublinear plans: the large ones at their own bound in 0.06 s, and the whole at
  // the bound, where the searches stopped 0.01-0.04% above it after 5 s with the small ones in
  // the gaps). With the line at kSmallShare, then, when that is not at the bound, at
  // kSmallOnTopShare; a start lower than every other is searched first (lstm-fashion-mnist's
  // greedy share step, with the wider line: at the bound in 1.7 s, 4.2 s as the last start).
  size_t placed_exactly = 0;  // the large buffers of the line before (nested lines: equal counts, equal sets)
  for (const int64_t line : {kSmallShare, kSmallOnTopShare}) {
    const std::vector<int> large = at_least(items, live_bytes / line);
    if (large.size() == placed_exactly) continue;  // (the same buffers on top as the line before: the same start)
    placed_exactly = large.size();
    std::vector<int64_t> st = small_on_top(items, offsets, live_bytes, large, kQuickShare * seconds);
    if (st.empty()) continue;
    if (at_bound(st)) return rep;
    int64_t least = INT64_MAX;
    for (const std::vector<int64_t>& other : starts) least = std::min(least, arena_top(items, other));
    if (arena_top(items, st) < least) starts.insert(starts.begin(), std::move(st));
  }
  int64_t bound = live_bytes;
  // Searches from each of `from` for `secs`, at once on the threads (one per start, a batch of
  // starts per thread count); the first to reach the bound stops the others. Then, in start
  // order (the same result whichever thread ran which), the bounds proven are taken and the
  // least arena kept (the earliest start on ties).
  const int threads = omp_in_parallel() ? 1 : std::max(1, omp_get_max_threads());
  auto search_from = [&](std::vector<std::vector<int64_t>>& from, double secs) {
    std::vector<PlacementReport> prs(from.size());
    std::vector<char> ran(from.size(), 0);
    std::atomic<bool> at_bound{false};
    const int64_t b = bound;
    parallel_each(from.size(), [&](size_t k) {
      if (at_bound.load()) return;
      prs[k] = place_from(items, from[k], b, secs, &at_bound);
      ran[k] = 1;
      if (prs[k].arena_bytes <= b) at_bound = true;
    });
    for (size_t k = 0; k < from.size(); ++k) {
      if (!ran[k]) continue;  // another reached the bound first
      bound = std::max(bound, prs[k].bound_bytes);
      if (prs[k].arena_bytes < rep.arena_bytes) rep.arena_bytes = prs[k].arena_bytes, offsets = from[k];
    }
  };
  // The time of one start when all run: a batch of `threads` at a time.
  const double batches = std::ceil(static_cast<double>(starts.size()) / threads);
  // First short looks from each start, in rounds of 1/8, 1/4 and 1/2 of kQuickShare of the time
  // (on copies: what the searches reach depends on their time, and a start that the full share
  // takes to the bound must not be left half-improved); the first at the bound ends it. ResNet-152's
  // budget=0.5x plan: its lifetime order's start reaches the bound in 0.02-0.03 s, the first
  // start's full share finds nothing; with one short look per start (0.125 s each, one after
  // another) the bound came at 0.40 s, with the rounds at 0.19 s, with the threads sooner. Then
  // the full shares, from the starts unchanged.
  std::vector<std::vector<int64_t>> copies = starts;
  for (double part : {0.125, 0.25, 0.5}) {
    if (rep.arena_bytes <= bound) break;
    search_from(copies, part * kQuickShare * seconds / batches);
  }
  if (rep.arena_bytes > bound) search_from(starts, std::max(0.0, seconds - elapsed()) / batches);
  rep.improved = rep.arena_bytes < rep.start_bytes;
  rep.bound_bytes = std::min(bound, rep.arena_bytes);
  rep.status = placement_status(rep.arena_bytes, live_bytes, rep.bound_bytes);
  rep.seconds = elapsed();
  return rep;
}

}  // namespace mnemo
