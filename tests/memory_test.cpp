// memory/: liveness, in-place, sharing, offsets; the validator on thousands of random DAGs; the
// executor on planned arenas giving bitwise the results of the trivial plan.
#include <algorithm>
#include <random>

#include "autograd/gradient.h"
#include "memory/planner.h"
#include "memory/report.h"
#include "memory/step_load.h"
#include "models/small_nets.h"
#include "test_util.h"
#include "train/session/param_store.h"

namespace mnemo::test {
namespace {

// A random DAG of cheap registered ops over float32[rows, cols] tensors: unary (relu, sigmoid,
// tanh, copy), binary (add, mul), add_n, views (identity, reshape), split/concat; random fan-out;
// some nodes are graph outputs.
Graph random_dag(std::mt19937& rng, int nodes) {
  Graph g;
  const int64_t rows = 2, cols = 4;
  std::vector<EntryRef> pool;
  const int inputs = 1 + static_cast<int>(rng() % 3);
  for (int i = 0; i < inputs; ++i) pool.push_back(g.input("x" + std::to_string(i), {DType::f32, {rows, cols}}));
  auto pick = [&]() {
    // Prefer recent entries (chains), sometimes reach far back (long lifetimes).
    const size_t n = pool.size();
    const size_t back = rng() % 4 == 0 ? rng() % n : rng() % std::min<size_t>(n, 3);
    return pool[n - 1 - back];
  };
  for (int k = 0; k < nodes; ++k) {
    const int kind = static_cast<int>(rng() % 10);
    EntryRef out;
    switch (kind) {
      case 0: out = g.add1("relu", {pick()}); break;
      case 1: out = g.add1("sigmoid", {pick()}); break;
      case 2: out = g.add1("tanh", {pick()}); break;
      case 3: out = g.add1("add", {pick(), pick()}); break;
      case 4: out = g.add1("mul", {pick(), pick()}); break;
      case 5: out = g.add1("add_n", {pick(), pick(), pick()}); break;
      case 6: out = g.add1("identity", {pick()}); break;
      case 7: {
        EntryRef r = g.add1("reshape", {pick()}, {{"shape", std::vector<int64_t>{cols, rows}}});
        out = g.add1("reshape", {g.add1("copy", {r})}, {{"shape", std::vector<int64_t>{rows, cols}}});
        break;
      }
      case 8: {
        const int id = g.add("split", {pick()}, {{"axis", int64_t{1}}, {"parts", int64_t{2}}});
        out = g.add1("concat", {{id, 1}, {id, 0}}, {{"axis", int64_t{1}}});
        break;
      }
      default: out = g.add1("copy", {pick()}); break;
    }
    pool.push_back(out);
    if (rng() % 8 == 0) g.outputs.push_back(out);
  }
  g.outputs.push_back(pool.back());
  return g;
}

std::vector<Tensor> run_outputs(const Graph& g, const MemoryPlan& plan, const std::vector<Tensor>& inputs) {
  Executor ex(g, plan);
  EXPECT_EQ(ex.allocated_bytes(), plan.arena_bytes);
  for (size_t i = 0; i < inputs.size(); ++i) ex.bind("x" + std::to_string(i), inputs[i].view());
  ex.run();
  std::vector<Tensor> out;
  for (const EntryRef& e : g.outputs) out.push_back(clone(ex.entry(e)));
  return out;
}

TEST(MemoryPlan, RandomDagsValidateAndComputeTheSameInEveryMode) {
  std::mt19937 rng(42);
  int inplace_total = 0, shared_smaller = 0;
  for (int trial = 0; trial < 2000; ++trial) {
    Graph g = random_dag(rng, 4 + static_cast<int>(rng() % 40));
    std::vector<Tensor> inputs;
    for (size_t v = 0; v < g.size() && g.node(static_cast<int>(v)).is(OpKind::input); ++v) {
      inputs.emplace_back(g.node(static_cast<int>(v)).outputs[0]);
      fill_distinct(inputs.back(), trial * 7 + v);
    }
    std::vector<Tensor> reference;
    int64_t none_bytes = 0;
    for (AllocMode mode : {AllocMode::none, AllocMode::inplace, AllocMode::share}) {
      PlanStats st;
      MemoryPlan plan = plan_memory(g, mode, &st);
      ASSERT_NO_THROW(validate_plan(g, plan)) << "trial " << trial << " mode " << alloc_mode_name(mode) << "\n" << g.to_text();
      EXPECT_LE(st.max_live_bytes, st.arena_bytes);
      auto out = run_outputs(g, plan, inputs);
      if (mode == AllocMode::none) {
        reference = std::move(out);
        none_bytes = st.arena_bytes;
        EXPECT_EQ(st.inplace, 0);
        continue;
      }
      for (size_t k = 0; k < out.size(); ++k)
        ASSERT_TRUE(bitwise_equal(out[k], reference[k])) << "trial " << trial << " mode " << alloc_mode_name(mode) << "\n" << g.to_text();
      if (mode == AllocMode::inplace) inplace_total += st.inplace;
      if (mode == AllocMode::share) shared_smaller += st.arena_bytes < none_bytes;
    }
  }
  EXPECT_GT(inplace_total, 1000);
  EXPECT_GT(shared_smaller, 1500);
}

// The validator is not a check that cannot fail: corrupt valid plans and expect rejections.
TEST(MemoryPlan, ValidatorRejectsOverlapsAndBadSlots) {
  Graph g;
  EntryRef x = g.input("x0", {DType::f32, {2, 4}});
  EntryRef a = g.add1("relu", {x}, {}, "a");
  EntryRef b = g.add1("sigmoid", {x}, {}, "b");
  EntryRef c = g.add1("add", {a, b}, {}, "c");
  g.outputs.push_back(c);
  MemoryPlan plan = plan_memory(g, AllocMode::share);
  ASSERT_NO_THROW(validate_plan(g, plan));
  MemoryPlan overlap = plan;
  overlap.entries[b.node][0].offset = overlap.entries[a.node][0].offset;  // a and b both live at step c
  try {
    validate_plan(g, overlap);
    FAIL();
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("overlaps"), std::string::npos) << e.what();
  }
  MemoryPlan outside = plan;
  outside.entries[c.node][0].offset = plan.arena_bytes;
  EXPECT_THROW(validate_plan(g, outside), Error);
  MemoryPlan misaligned = plan;
  misaligned.entries[a.node][0].offset += 4;
  EXPECT_THROW(validate_plan(g, misaligned), Error);
  // In-place into a graph output's buffer is never allowed: c is kept, d may not take it over.
  Graph g2 = g;
  EntryRef d = g2.add1("relu", {c}, {}, "d");
  g2.outputs.push_back(d);
  MemoryPlan p2 = plan_memory(g2, AllocMode::share);
  ASSERT_NO_THROW(validate_plan(g2, p2));
  EXPECT_NE(p2.entries[d.node][0].offset, p2.entries[c.node][0].offset);
  p2.entries[d.node][0].offset = p2.entries[c.node][0].offset;
  EXPECT_THROW(validate_plan(g2, p2), Error);
}

TEST(MemoryPlan, InplaceOnlyWhenLastReaderAndNeverIntoInputsOrParams) {
  Graph g;
  EntryRef x = g.input("x0", {DType::f32, {8}});
  EntryRef a = g.add1("relu", {x}, {}, "a");       // x is a graph input: never in place
  EntryRef b = g.add1("sigmoid", {a}, {}, "b");    // a read again below: no in-place
  EntryRef c = g.add1("tanh", {a}, {}, "c");       // last reader of a: in place
  EntryRef d = g.add1("mul", {b, c}, {}, "d");     // last reader of b and c: in place on b
  g.outputs.push_back(d);
  PlanStats st;
  MemoryPlan p = plan_memory(g, AllocMode::inplace, &st);
  validate_plan(g, p);
  EXPECT_NE(p.entries[b.node][0].offset, p.entries[a.node][0].offset);
  EXPECT_EQ(p.entries[c.node][0].offset, p.entries[a.node][0].offset);
  EXPECT_EQ(p.entries[d.node][0].offset, p.entries[b.node][0].offset);
  EXPECT_EQ(st.inplace, 2);
  EXPECT_EQ(st.arena_bytes, 2 * 256);
}

TEST(MemoryPlan, SharingReusesDeadBuffersAndReportsFragmentation) {
  Graph g;
  EntryRef x = g.input("x0", {DType::f32, {64}});
  EntryRef h = x;
  for (int i = 0; i < 10; ++i) h = g.add1("copy", {h});  // a chain: two buffers alive at a time
  g.outputs.push_back(h);
  PlanStats st;
  MemoryPlan p = plan_memory(g, AllocMode::share, &st);
  validate_plan(g, p);
  EXPECT_EQ(st.arena_bytes, 2 * 256);
  EXPECT_EQ(st.max_live_bytes, 2 * 256);
  EXPECT_DOUBLE_EQ(st.fragmentation, 0.0);
  PlanStats none;
  plan_memory(g, AllocMode::none, &none);
  EXPECT_EQ(none.arena_bytes, 10 * 256);
}

// 1 to `most` buffers, each starting at a step below `steps`, living 1 to `longest` steps, of 1 to
// `bytes` bytes.
std::vector<Buffer> random_intervals(std::mt19937& rng, unsigned most, unsigned steps, unsigned longest, unsigned bytes) {
  std::vector<Buffer> items(1 + rng() % most);
  for (Buffer& b : items) {
    b.start = static_cast<int>(rng() % steps);
    b.end = b.start + static_cast<int>(rng() % longest);
    b.bytes = 1 + static_cast<int64_t>(rng() % bytes);
  }
  return items;
}

// pack_intervals in every order on random intervals: no two items live at the same step overlap,
// the arena is at least the live-bytes bound and holds every item; `give_up_above` stops early
// with a size above it exactly when the full packing would exceed it.
TEST(MemoryPlan, PackIntervalsInEveryOrderIsValidAndGivesUpAboveTheLimit) {
  std::mt19937 rng(17);
  for (int trial = 0; trial < 200; ++trial) {
    const std::vector<Buffer> items = random_intervals(rng, 40, 30, 10, 4096);
    Liveness l;
    l.buffers = items;
    const int64_t bound = max_live_bytes(l, true);
    for (PackOrder by : {PackOrder::size, PackOrder::lifetime, PackOrder::area}) {
      std::vector<int64_t> off(items.size(), -1);
      const int64_t arena = pack_intervals(items, off, by);
      ASSERT_GE(arena, bound);
      for (size_t i = 0; i < items.size(); ++i) {
        const int64_t si = align_up(items[i].bytes);
        ASSERT_GE(off[i], 0);
        ASSERT_LE(off[i] + si, arena);
        for (size_t j = 0; j < i; ++j) {
          if (items[i].start > items[j].end || items[j].start > items[i].end) continue;
          const bool apart = off[i] + si <= off[j] || off[j] + align_up(items[j].bytes) <= off[i];
          ASSERT_TRUE(apart) << "trial " << trial << ": items " << i << " and " << j << " overlap";
        }
      }
      std::vector<int64_t> early(items.size(), -1);
      const int64_t stopped = pack_intervals(items, early, by, arena - 1);
      EXPECT_GT(stopped, arena - 1);
      std::vector<int64_t> full(items.size(), -1);
      EXPECT_EQ(pack_intervals(items, full, by, arena), arena) << "a limit the packing meets does not stop it";
    }
  }
}

// pack_intervals against best fit written out plainly (items in the order's key, then larger,
// then earlier; each at the smallest gap between the placed items that meet it in time, in
// address order, that holds it, the lowest of equal ones, else the first offset above them all):
// the same offsets, exactly, in every order, with some items fixed beforehand.
TEST(MemoryPlan, PackIntervalsIsBestFitAsDefined) {
  std::mt19937 rng(29);
  for (int trial = 0; trial < 300; ++trial) {
    const std::vector<Buffer> items = random_intervals(rng, 60, 40, 15, 5000);
    std::vector<int64_t> fixed(items.size(), -1);
    for (int64_t& o : fixed)
      if (rng() % 8 == 0) o = 256 * static_cast<int64_t>(rng() % 40);
    for (PackOrder by : {PackOrder::size, PackOrder::lifetime, PackOrder::area}) {
      auto key = [&](size_t i) {
        const int64_t steps = items[i].end - items[i].start + 1;
        return by == PackOrder::size ? items[i].bytes : by == PackOrder::lifetime ? steps : items[i].bytes * steps;
      };
      std::vector<size_t> order;
      for (size_t i = 0; i < items.size(); ++i)
        if (fixed[i] < 0) order.push_back(i);
      std::stable_sort(order.begin(), order.end(), [&](size_t a, size_t b) {
        if (key(a) != key(b)) return key(a) > key(b);
        return items[a].bytes != items[b].bytes ? items[a].bytes > items[b].bytes : items[a].start < items[b].start;
      });
      std::vector<int64_t> want = fixed;
      int64_t want_top = 0;
      for (size_t i = 0; i < items.size(); ++i)
        if (want[i] >= 0) want_top = std::max(want_top, want[i] + align_up(items[i].bytes));
      for (size_t k : order) {
        std::vector<std::pair<int64_t, int64_t>> meets;  // (offset, end) of the placed items meeting k
        for (size_t j = 0; j < items.size(); ++j)
          if (want[j] >= 0 && items[j].start <= items[k].end && items[k].start <= items[j].end)
            meets.push_back({want[j], want[j] + align_up(items[j].bytes)});
        std::sort(meets.begin(), meets.end());
        const int64_t size = align_up(items[k].bytes);
        int64_t cursor = 0, best = -1, best_gap = INT64_MAX;
        for (const auto& [o, e] : meets) {
          if (o - cursor >= size && o - cursor < best_gap) best = cursor, best_gap = o - cursor;
          cursor = std::max(cursor, e);
        }
        want[k] = best >= 0 ? best : cursor;
        want_top = std::max(want_top, want[k] + size);
      }
      std::vector<int64_t> got = fixed;
      const int64_t top = pack_intervals(items, got, by);
      ASSERT_EQ(got, want) << "trial " << trial;
      ASSERT_EQ(top, want_top) << "trial " << trial;
    }
  }
}

// share's plan is the best of the class passes and three joint packings: valid, never above the
// class passes alone, never below the live-bytes bound, and marked joint exactly when smaller.
// (The gains on real networks are in docs/MEMORY.md "Layout of the arena".)
TEST(MemoryPlan, SharePacksNoWorseThanTheClassPasses) {
  std::mt19937 rng(3);
  for (int trial = 0; trial < 60; ++trial) {
    const Graph g = random_dag(rng, 8 + static_cast<int>(rng() % 30));
    PlanStats st;
    validate_plan(g, plan_memory(g, AllocMode::share, &st));
    EXPECT_LE(st.arena_bytes, st.class_pass_bytes);
    EXPECT_GE(st.arena_bytes, st.max_live_bytes);
    EXPECT_EQ(st.joint_packing, st.arena_bytes < st.class_pass_bytes);
  }
}

// `enough` (a search asking only whether a plan fits, memory/budget_search.cpp): with the class
// passes within it, their packing is the plan (valid, no joint packing tried); with no packing
// within it, the joint packings give up above it and the plan is the class passes' (valid; the
// full plan's arena is at most that). At every `enough` the plan is valid, never below the full
// one, and within `enough` exactly when the full plan is: the searches' decisions (fits or not)
// are the same either way.
TEST(MemoryPlan, EnoughStopsAtTheFirstPackingWithinIt) {
  std::mt19937 rng(3);
  int joint = 0, checked = 0;
  for (int trial = 0; trial < 60; ++trial) {
    const Graph g = random_dag(rng, 8 + static_cast<int>(rng() % 30));
    PlanStats full, at_class, below;
    plan_memory(g, AllocMode::share, &full);
    const MemoryPlan p = plan_memory(g, AllocMode::share, &at_class, {}, nullptr, -1, {}, -1, full.class_pass_bytes);
    validate_plan(g, p);
    EXPECT_EQ(at_class.arena_bytes, full.class_pass_bytes) << trial;
    EXPECT_FALSE(at_class.joint_packing) << trial;
    validate_plan(g, plan_memory(g, AllocMode::share, &below, {}, nullptr, -1, {}, -1, full.arena_bytes - 1));
    EXPECT_EQ(below.arena_bytes, full.class_pass_bytes) << trial;
    EXPECT_FALSE(below.joint_packing) << trial;
    joint += full.joint_packing;
    // Every `enough` from below the live bytes to above the class passes.
    const int64_t lo = full.max_live_bytes - 64, hi = full.class_pass_bytes + 64;
    for (int64_t enough = lo; enough <= hi; enough += std::max<int64_t>(1, (hi - lo) / 40)) {
      PlanStats st;
      const MemoryPlan pe = plan_memory(g, AllocMode::share, &st, {}, nullptr, -1, {}, -1, enough);
      validate_plan(g, pe);
      EXPECT_EQ(pe.arena_bytes, st.arena_bytes) << trial << " " << enough;
      EXPECT_GE(st.arena_bytes, full.arena_bytes) << trial << " " << enough;
      EXPECT_LE(st.arena_bytes, full.class_pass_bytes) << trial << " " << enough;
      EXPECT_EQ(st.arena_bytes <= enough, full.arena_bytes <= enough) << trial << " " << enough;
      ++checked;
    }
  }
  EXPECT_GT(joint, 0);  // (some trials' joint packing is smaller: the case `enough` skips)
  EXPECT_GT(checked, 60 * 20);
}

// ... and `enough` reaches plan_memory from plan_training_step (how the search plans its moves):
// on the small nets' training graphs an arena within it is enough (never below the full plan's,
// and above it where a joint packing won), and with none within it the plan is the class
// passes' (above the full plan's where a joint packing won).
TEST(MemoryPlan, EnoughReachesPlanMemoryFromTheTrainingStep) {
  int joint = 0;
  for (int which = 0; which < 3; ++which) {
    Model m = which == 0 ? build_mlp(8, 16, 32, 4) : which == 1 ? build_small_cnn(4, 8, 4, 3) : build_lstm(4, 3, 5, 6, 2, 4);
    const Graph& fwd = m.builder.graph();
    for (int mirror : {0, 1}) {
      const TrainingGraph tg = build_training_graph(fwd, m.loss, MirrorPlan(fwd.size(), mirror));
      const MemoryReport full = plan_training_step(tg, AllocMode::share).report;
      const MemoryReport any = plan_training_step(tg, AllocMode::share, {.enough = INT64_MAX}).report;
      const MemoryReport none = plan_training_step(tg, AllocMode::share, {.enough = full.arena_bytes - 1}).report;
      EXPECT_GE(any.arena_bytes, full.arena_bytes) << which << " " << mirror;
      EXPECT_EQ(none.arena_bytes, any.arena_bytes) << which << " " << mirror;  // (both the class passes')
      joint += any.arena_bytes > full.arena_bytes;
    }
  }
  EXPECT_GT(joint, 0);  // (without `enough` passed on, every `any` is the full plan)
}

// Training graphs of the small nets: every mode validates, and losses and gradients are
// bitwise identical to mode none.
TEST(MemoryPlan, TrainingGraphsBitwiseIdenticalAcrossModes) {
  for (int which = 0; which < 3; ++which) {
    Model m = which == 0 ? build_mlp(8, 16, 32, 4) : which == 1 ? build_small_cnn(4, 8, 4, 3) : build_lstm(4, 3, 5, 6, 2, 4);
    const Graph& fwd = m.builder.graph();
    for (int mirror : {0, 1}) {
      TrainingGraph tg = build_training_graph(fwd, m.loss, MirrorPlan(fwd.size(), mirror));
      Tensor data(fwd.node(fwd.find(m.data)).outputs[0]), labels(fwd.node(fwd.find(m.labels)).outputs[0]);
      fill_normal(data, 3);
      fill_ints(labels, 4, fwd.type(m.logits).shape[1]);
      std::vector<Tensor> ref;
      int64_t none_bytes = 0;
      // (share twice: best fit, then with the exact placement, memory/placement.h)
      for (int k = 0; k < 4; ++k) {
        const AllocMode mode = k == 0 ? AllocMode::none : k == 1 ? AllocMode::inplace : AllocMode::share;
        PlanStats st;
        MemoryPlan plan = plan_memory(tg.graph, mode, &st, {}, nullptr, -1, {}, k == 3 ? 2.0 : -1.0);
        ASSERT_NO_THROW(validate_plan(tg.graph, plan)) << which << " " << alloc_mode_name(mode);
        ParamStore params(fwd, m.builder.params(), 9);
        Executor ex(tg.graph, plan);
        EXPECT_EQ(ex.allocated_bytes(), plan.arena_bytes);
        params.bind(ex);
        ex.bind(m.data, data.view());
        ex.bind(m.labels, labels.view());
        ex.run();
        std::vector<Tensor> out;
        for (const EntryRef& e : tg.graph.outputs) out.push_back(clone(ex.entry(e)));
        if (mode == AllocMode::none) {
          ref = std::move(out);
          none_bytes = st.feature_map_bytes;
          continue;
        }
        for (size_t k = 0; k < out.size(); ++k)
          EXPECT_TRUE(bitwise_equal(out[k], ref[k])) << "net " << which << " mode " << alloc_mode_name(mode) << " output " << k;
        if (mode == AllocMode::share) {
          EXPECT_LT(st.feature_map_bytes, none_bytes);
          EXPECT_GE(st.arena_bound_bytes, st.max_live_bytes);
          EXPECT_LE(st.arena_bound_bytes, st.arena_bytes);
        } else {  // nothing shared: the arena is the only packing the mode allows
          EXPECT_EQ(st.arena_bound_bytes, st.arena_bytes);
          EXPECT_EQ(st.placement, "no sharing in this mode");
        }
      }
    }
  }
}

TEST(MemoryPlan, UnknownModeIsAClearError) {
  try {
    parse_alloc_mode("shared");
    FAIL();
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("expected none, inplace or share"), std::string::npos);
  }
}

// StepLoad (budget's fills) against a plain array: random range adds and range maxima.
TEST(StepLoad, RangeAddAndMaxMatchAPlainArray) {
  std::mt19937 rng(13);
  for (int trial = 0; trial < 50; ++trial) {
    const int n = 1 + static_cast<int>(rng() % 40);
    std::vector<int64_t> live(n);
    for (int64_t& v : live) v = static_cast<int64_t>(rng() % 1000);
    StepLoad load(live);
    for (int op = 0; op < 200; ++op) {
      int a = static_cast<int>(rng() % n), b = static_cast<int>(rng() % n);
      if (a > b) std::swap(a, b);
      if (rng() % 2) {
        const int64_t bytes = static_cast<int64_t>(rng() % 500);
        load.add(a, b, bytes);
        for (int s = a; s <= b; ++s) live[s] += bytes;
      } else {
        ASSERT_EQ(load.max(a, b), *std::max_element(live.begin() + a, live.begin() + b + 1)) << "trial " << trial << " op " << op;
      }
    }
  }
}

}  // namespace
}  // namespace mnemo::test
