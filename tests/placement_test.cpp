// Exact placement (memory/placement.h). On random buffer sets small enough to enumerate, the least
// arena of any packing is found by brute force (every order of the buffers, each dropped onto
// the ones before it that it meets: every packing compacts to one of these), independently of the
// search's pruning rules; place_exactly must reach it, and a bound it calls proven must equal it.
// On larger sets: the packing is valid and never worse, the bound between the live bytes and the
// arena. On the zoo's plans: the plan stays valid with the exact placement.
#include <algorithm>
#include <numeric>
#include <random>

#include "core/memory_plan.h"
#include "train/config/config.h"
#include "train/session/pipeline.h"
#include "memory/placement.h"
#include "memory/planner.h"
#include "ops/conv2d.h"
#include "test_util.h"

namespace mnemo::test {
namespace {

std::vector<Buffer> random_buffers(std::mt19937& rng, int n, int steps) {
  std::uniform_int_distribution<int> step(0, steps - 1), units(1, 12);
  std::vector<Buffer> items(n);
  for (Buffer& b : items) {
    b.start = step(rng);
    b.end = std::min(steps - 1, b.start + std::uniform_int_distribution<int>(0, steps / 2)(rng));
    b.bytes = int64_t{256} * units(rng);
  }
  return items;
}

int64_t live_of(const std::vector<Buffer>& items) {
  Liveness l;
  l.buffers = items;
  return max_live_bytes(l, true);
}

int64_t brute_force(const std::vector<Buffer>& items) {
  std::vector<int> order(items.size());
  std::iota(order.begin(), order.end(), 0);
  int64_t best = INT64_MAX;
  do {
    std::vector<int64_t> off(items.size(), -1);
    int64_t top = 0;
    for (size_t k = 0; k < order.size(); ++k) {
      const Buffer& b = items[order[k]];
      int64_t at = 0;
      for (size_t q = 0; q < k; ++q) {
        const Buffer& c = items[order[q]];
        if (c.start <= b.end && b.start <= c.end) at = std::max(at, off[order[q]] + c.bytes);
      }
      off[order[k]] = at;
      top = std::max(top, at + b.bytes);
    }
    best = std::min(best, top);
  } while (std::next_permutation(order.begin(), order.end()));
  return best;
}

TEST(Placement, ReachesAndProvesTheBruteForceOptimum) {
  std::mt19937 rng(2026);
  int improved = 0, proven_by_search = 0;
  for (int trial = 0; trial < 300; ++trial) {
    const std::vector<Buffer> items = random_buffers(rng, 7, 8);
    std::vector<int64_t> start_offsets;
    const int64_t start = pack_intervals(items, start_offsets);
    const int64_t live = live_of(items);
    const int64_t optimum = brute_force(items);
    ASSERT_GE(optimum, live);
    // With the live bytes as the first bound; then with a weaker one (256 bytes), so that only a
    // search run to the end can prove the optimum (random sets this small rarely have their
    // optimum above the live bytes).
    for (const int64_t first_bound : {live, int64_t{256}}) {
      std::vector<int64_t> offsets = start_offsets;
      const PlacementReport r = place_exactly(items, offsets, first_bound, 30);
      SCOPED_TRACE("trial " + std::to_string(trial) + ", first bound " + std::to_string(first_bound) + ": " + r.status);
      EXPECT_EQ(checked_arena(items, offsets), r.arena_bytes);
      EXPECT_EQ(r.start_bytes, start);
      EXPECT_EQ(r.arena_bytes, optimum);
      EXPECT_EQ(r.bound_bytes, optimum);  // proven
      EXPECT_EQ(r.improved, optimum < start);
      if (first_bound == live) {
        EXPECT_TRUE(r.status == (optimum == live ? "at the live-bytes bound" : "optimal"));
      } else {
        EXPECT_EQ(r.status, "optimal");
        proven_by_search += r.status == "optimal";
      }
    }
    improved += optimum < start;
  }
  // The improvement over best fit was exercised, and so was the proof.
  EXPECT_GT(improved, 10);
  EXPECT_EQ(proven_by_search, 300);
}

TEST(Placement, LargeSetsStayValidAndBounded) {
  std::mt19937 rng(7);
  for (int trial = 0; trial < 6; ++trial) {
    std::vector<Buffer> items = random_buffers(rng, 300, 200);
    // (from the fourth set on, the others 64x larger: the small ones are then below 1/4096 of
    // the live bytes, so they are also placed on top of the others placed exactly)
    if (trial >= 3)
      for (Buffer& b : items) b.bytes *= 64;
    for (int k = 0; k < 40; ++k) items[k].bytes = 256;  // small ones, packed after the rest
    std::vector<int64_t> offsets;
    const int64_t start = pack_intervals(items, offsets);
    const int64_t live = live_of(items);
    const PlacementReport r = place_exactly(items, offsets, live, 0.5);
    SCOPED_TRACE(r.status);
    EXPECT_EQ(checked_arena(items, offsets), r.arena_bytes);
    EXPECT_LE(r.arena_bytes, start);
    EXPECT_GE(r.bound_bytes, live);
    EXPECT_LE(r.bound_bytes, r.arena_bytes);
    EXPECT_LE(r.seconds, 5.0);  // the limit is kept (with room for a loaded machine)
  }
}

TEST(Placement, CheckedArenaCatchesOverlaps) {
  const std::vector<Buffer> items = {{512, 0, 3, false}, {256, 2, 5, false}};
  EXPECT_EQ(checked_arena(items, {0, 512}), 768);
  EXPECT_THROW(checked_arena(items, {0, 256}), Error);
  EXPECT_THROW(checked_arena(items, {0, 100}), Error);  // not aligned
}

// Plans whose best fit lies above the live bytes (shapes only: nothing runs), placed exactly: the
// plan stays valid and the executor's arena is its arena; the report's bound lies between the
// live bytes and the arena, and here the arena reaches it.
TEST(Placement, ExactPlansOfTheZooAreValid) {
  for (const auto& [file, mode] : {std::pair<const char*, const char*>{"alexnet", "share"}, {"alexnet", "sublinear"}, {"vgg11", "sublinear"}}) {
    SCOPED_TRACE(std::string(file) + " " + mode);
    Config c = load_config(std::string(MNEMO_SOURCE_DIR "/configs/table2/") + file + ".yaml");
    const Pipeline p = build_pipeline(c, static_data_shape(c), c.data.batch);
    c.placement_seconds = 0;
    const MirrorResult fit = plan_pipeline(c, p, mode, nullptr, true);
    c.placement_seconds = 10;
    const MirrorResult exact = plan_pipeline(c, p, mode, nullptr, true);
    const MemoryReport& f = fit.planned.report;
    const MemoryReport& e = exact.planned.report;
    EXPECT_GT(f.arena_bytes, f.max_live_bytes);  // (the case this test is about)
    EXPECT_EQ(f.placement, "best fit");
    validate_plan(exact.training.graph, exact.planned.plan);
    EXPECT_EQ(exact.planned.plan.arena_bytes, e.arena_bytes);
    EXPECT_LT(e.arena_bytes, f.arena_bytes);
    EXPECT_GE(e.arena_bound_bytes, e.max_live_bytes);
    EXPECT_EQ(e.arena_bound_bytes, e.arena_bytes) << e.placement;
    EXPECT_EQ(e.placement, "at the live-bytes bound");
  }
}

// Plans `mode` of `file` with best fit (above the live bytes: the case these tests are about) and
// with a 0.05 s exact placement (too short for the searches to get anywhere): the placement starts
// `at_bound` are themselves at the live-bytes bound (valid: checked_arena), with `others_above`
// every other start is above it, and the exact placement reaches the bound.
void expect_start_at_the_bound(const std::string& file, const std::string& mode, const std::vector<std::string>& at_bound, bool others_above) {
  SCOPED_TRACE(file + " " + mode);
  Config c = load_config(MNEMO_SOURCE_DIR + file);
  c.lstm_head = "ops";  // an LSTM's per-step classifiers, the graph these cases were found on
  const Pipeline p = build_pipeline(c, static_data_shape(c), c.data.batch);
  c.placement_seconds = 0;
  const MirrorResult fit = plan_pipeline(c, p, mode, nullptr, true);
  c.placement_seconds = 0.05;
  const MirrorResult exact = plan_pipeline(c, p, mode, nullptr, true);
  ASSERT_EQ(fit.mirror, exact.mirror);  // (the same member chosen)
  const Liveness l = analyze_liveness(fit.training.graph, true, fit.planned.plan.kernels);
  const int64_t live = max_live_bytes(l, true);
  ASSERT_EQ(live, fit.planned.report.max_live_bytes);
  EXPECT_GT(fit.planned.report.arena_bytes, live);
  const std::vector<PlacementStart> starts = placement_starts(l.buffers, true);
  ASSERT_EQ(starts.size(), 7u);
  for (const std::string& name : at_bound)
    EXPECT_EQ(std::count_if(starts.begin(), starts.end(), [&](const PlacementStart& st) { return st.name == name; }), 1) << name;
  bool stack_at_bound = false;
  for (size_t k = 0; k < starts.size(); ++k) {
    const int64_t arena = checked_arena(l.buffers, starts[k].offsets);
    if (std::find(at_bound.begin(), at_bound.end(), starts[k].name) != at_bound.end()) {
      EXPECT_EQ(arena, live) << starts[k].name;
    } else if (others_above) {
      EXPECT_GT(arena, live) << starts[k].name;
    }
    stack_at_bound |= k < 5 && arena == live;
    EXPECT_EQ(starts[k].only_if_lowest, k >= 5) << starts[k].name;
  }
  // Without always_split the splits are built only when none of the first five is at the bound.
  EXPECT_EQ(placement_starts(l.buffers).size(), stack_at_bound ? 5u : 7u);
  validate_plan(exact.training.graph, exact.planned.plan);
  const MemoryReport& e = exact.planned.report;
  EXPECT_EQ(exact.planned.plan.arena_bytes, e.arena_bytes);
  EXPECT_EQ(e.arena_bytes, live);
  EXPECT_EQ(e.placement, "at the live-bytes bound");
  // A start at the bound as it is is taken as it is (the first such): every buffer where it put it.
  const auto taken = std::find_if(starts.begin(), starts.end(), [&](const PlacementStart& st) { return checked_arena(l.buffers, st.offsets) == live; });
  ASSERT_NE(taken, starts.end());
  const MemoryPlan& plan = exact.planned.plan;
  int compared = 0;
  for (size_t v = 0; v < l.entry_buffer.size(); ++v) {
    for (size_t j = 0; j < l.entry_buffer[v].size(); ++j) {
      const int b = l.entry_buffer[v][j];
      if (b < 0 || aliased_input(exact.training.graph.node(static_cast<int>(v)), j)) continue;
      EXPECT_EQ(plan.entries[v][j].offset, taken->offsets[b]) << exact.training.graph.node(static_cast<int>(v)).name;
      ++compared;
    }
    if (const int b = l.workspace_buffer[v]; b >= 0) {
      EXPECT_EQ(plan.workspace[v].offset, taken->offsets[b]);
      ++compared;
    }
  }
  EXPECT_GT(compared, 1000);
}

// ResNet-152's budget=0.65x plan (a filled member, `fill+chains`, at its level over many steps):
// best fit is above the live bytes; the start stacked at the peak (the buffers live there,
// longest lived lowest) is at the bound as it is. (This was the budget=0.5x plan, where the
// searches from best fit stopped 0.02% above the bound after 5 s, tiny BatchNorm statistics
// living through the whole step ending on top of the one peak step; since fills keep back in a
// second order too, 0.5x chooses another plan, which no start packs at the bound as it is and the
// searches do in 0.04 s; then the 0.55x plan, until batch norms were recomputed from their saved
// statistics on 2026-11-28: its plan changed, and no start packs it at the bound as it is; then
// the 0.6x plan, until the weight-heavy convolutions ran in parts on 2026-11-29: there best fit
// and the exact placement now choose different members.)
TEST(Placement, TheStartStackedAtThePeakReachesTheBoundOfAFilledBudgetPlan) {
  expect_start_at_the_bound("/configs/table2/resnet152.yaml", "budget=0.65x", {"stacked at the peak, longest lived lowest"}, false);
}

// The start stacked at the peak with the latest end lowest (the buffers that die first after the
// peak on top, so the room they leave is one piece where the buffers made after the peak go) is
// at the live-bytes bound as it is on the fused LSTM's sublinear plan and ResNet-101's
// budget=0.55x plan with the FLOPs-only objective (`:balance=0`; the default roofline cost chooses
// another plan, at the bound from three starts); every other start is above it, but for the
// splits at the peaks on the LSTM's. (Before this start the searches stopped 0.19% above the
// bound on the LSTM's plan after 5 s. The ResNet-101 case was budget=0.6x:balance=0 until batch
// norms were recomputed from their saved statistics on 2026-11-28: that plan is now at the bound
// from three starts.)
TEST(Placement, TheStartWithTheLatestEndLowestIsAtTheBound) {
  expect_start_at_the_bound("/configs/bench-lstm-2x512-fused.yaml", "sublinear:chen",
                            {"stacked at the peak, latest end lowest", "split at the peaks, the rest lowest",
                             "split at the peaks, the rest on the first chain"},
                            true);
  expect_start_at_the_bound("/configs/table2/resnet101.yaml", "budget=0.55x:balance=0", {"stacked at the peak, latest end lowest"}, true);
}

// The splits at the peaks (two nested chains stacked from both ends of the free piece, the
// buffers before and after the peak placed apart) are at the live-bytes bound as they are where
// every other start is above it and the searches from them stopped 0.01-0.04% above it after
// 5 s: DenseNet-169's share plan (both splits) and DARTS' sublinear plan (the rest on the first
// chain; the rest lowest is 1.5 KiB above). The DARTS case was found with AVX-512's oneDNN
// formats (channel blocks of 16): its convolutions' workspaces, and so its plan, are others where
// oneDNN blocks by 8 (an AVX2-only CPU, 2026-11-29: that start ends 1.5 KiB above), so it is
// planned only where the blocks are 16.
TEST(Placement, TheSplitsAtThePeaksReachTheBound) {
  expect_start_at_the_bound("/configs/table2/densenet169.yaml", "share",
                            {"split at the peaks, the rest lowest", "split at the peaks, the rest on the first chain"}, true);
  if (ops::conv::onednn_channel_block() == 16)
    expect_start_at_the_bound("/configs/table2/darts.yaml", "sublinear:chen", {"split at the peaks, the rest on the first chain"}, true);
  else
    std::printf("DARTS' case left out: oneDNN's channel block is %lld here, the case's is 16\n",
                static_cast<long long>(ops::conv::onednn_channel_block()));
}

// The small buffers placed last, on top of the others placed exactly: on ResNet-101's and
// Inception-v3's sublinear plans every start is above the live-bytes bound (the splits too: their
// peaks lie in the recomputation), and the searches stopped 0.04% and 0.01% above it at the 5 s
// limit with the small buffers (below 1/4096 of the live bytes) in the gaps. The large ones alone
// reach their own bound, and the small ones live at the peak, stacked on them, fill the rest of
// it: the exact placement is at the bound, well within the limit, and the plan valid. On
// Inception-v3's share plan in the greedy order (every start above the bound, the searches 2.5
// KiB above it at the limit) the second round does it. On lstm-fashion-mnist's share plan in the
// greedy order a 14 KiB and a 2 KiB buffer live at the peak (1/1800 and 1/13000 of the live
// bytes) ended on top: with the line at 1/4096 of the live bytes the large ones stop above their
// own bound, and the searches stopped 1.5 KiB above the bound after 60 s; the wider line (1/1024)
// stacks both with the small ones, and the searches from there reach it.
TEST(Placement, TheSmallBuffersOnTopReachTheBound) {
  // Inception-v3's share plan in the greedy order: two small buffers living just after the peak
  // are placed with the large ones in the second round.
  const struct { const char *file, *mode, *order; } cases[] = {{"table2/resnet101", "sublinear:chen", "default"},
                                                               {"table2/inception_v3", "sublinear:chen", "default"},
                                                               {"table2/inception_v3", "share", "greedy"},
                                                               {"lstm-fashion-mnist", "share", "greedy"}};
  for (const auto& [file, mode, order] : cases) {
    SCOPED_TRACE(std::string(file) + " " + mode + " " + order);
    Config c = load_config(std::string(MNEMO_SOURCE_DIR "/configs/") + file + ".yaml");
    const Pipeline p = build_pipeline(c, static_data_shape(c), c.data.batch);
    c.placement_seconds = 60;  // (reached in under a second here; the limit is far off on a loaded machine)
    c.order = order;
    const MirrorResult exact = plan_pipeline(c, p, mode, nullptr, true);
    const Liveness l = analyze_liveness(exact.training.graph, true, exact.planned.plan.kernels);
    const int64_t live = max_live_bytes(l, true);
    for (const PlacementStart& st : placement_starts(l.buffers, true)) EXPECT_GT(checked_arena(l.buffers, st.offsets), live) << st.name;
    validate_plan(exact.training.graph, exact.planned.plan);
    const MemoryReport& e = exact.planned.report;
    EXPECT_EQ(exact.planned.plan.arena_bytes, e.arena_bytes);
    EXPECT_EQ(e.arena_bytes, live);
    EXPECT_EQ(e.placement, "at the live-bytes bound");
  }
}

// Two nested chains crossing each other: a1 [0,30] a2 [2,28] a3 [4,26] and b1 [5,35] b2 [7,33]
// b3 [9,31], 4 units each (all six live at steps 9-26, 24 units: the peak, taken at step 9); y
// [3,3] of 15 units before it (a1 and a2 live) and z [32,32] of 15 after it (b1 and b2 live). A
// stack in one order leaves the room free at y's or z's step in two pieces: the latest end lowest
// (b1 b2 b3 a1 a2 a3) at step 3, 12 + 4 units; the longest lived lowest (a1 b1 a2 b2 a3 b3) at
// both; and the earliest start lowest (not a start) would at step 32. Best fit is 7 units above
// the bound in all three orders. One chain upward from 0 and the other downward from 24 keep the
// room in one piece on both sides: the splits are at the bound.
TEST(Placement, TheSplitStacksTwoCrossingChainsFromBothEnds) {
  constexpr int64_t u = 1024;
  const std::vector<Buffer> items = {{4 * u, 0, 30, false}, {4 * u, 2, 28, false}, {4 * u, 4, 26, false}, {4 * u, 5, 35, false},
                                     {4 * u, 7, 33, false}, {4 * u, 9, 31, false}, {15 * u, 3, 3, false},  {15 * u, 32, 32, false}};
  ASSERT_EQ(live_of(items), 24 * u);
  int at_bound = 0;
  for (const PlacementStart& st : placement_starts(items, true)) {
    const int64_t arena = checked_arena(items, st.offsets);
    if (st.name.rfind("split at the peaks", 0) == 0) {
      EXPECT_EQ(arena, 24 * u) << st.name;
      EXPECT_TRUE(st.only_if_lowest);
      ++at_bound;
    } else {
      EXPECT_GT(arena, 24 * u) << st.name;
    }
  }
  EXPECT_EQ(at_bound, 2);
}

// Every start is a valid packing (checked_arena throws on an overlap) on random sets and on
// training-like ones (nested lifetimes around a peak, with crossing ones and short ones on both
// sides), and none is below the live bytes.
TEST(Placement, EveryStartIsValid) {
  std::mt19937 rng(11);
  for (int trial = 0; trial < 40; ++trial) {
    std::vector<Buffer> items;
    if (trial % 2) {
      items = random_buffers(rng, 200, 120);
    } else {
      std::uniform_int_distribution<int> units(1, 40), side(0, 59), len(0, 6);
      for (int k = 0; k < 60; ++k) {  // saved in forward (step k), freed in backward (119 - k), some shifted
        const int shift = trial % 4 == 0 ? len(rng) : 0;
        items.push_back({256 * units(rng), k, std::min(119, 119 - k + shift), false});
      }
      for (int k = 0; k < 120; ++k) {
        const int s = k < 60 ? side(rng) : 60 + side(rng);
        items.push_back({256 * units(rng), s, std::min(119, s + len(rng)), false});
      }
    }
    const int64_t live = live_of(items);
    for (const PlacementStart& st : placement_starts(items, true)) {
      SCOPED_TRACE(st.name);
      int64_t arena = 0;
      ASSERT_NO_THROW(arena = checked_arena(items, st.offsets));
      EXPECT_GE(arena, live);
    }
  }
}

}  // namespace
}  // namespace mnemo::test
