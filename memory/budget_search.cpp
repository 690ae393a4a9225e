// budget=SIZE:search: a local search over mirror plans with exact plans (memory/budget_search.h).
#include "memory/budget_search.h"

#include <omp.h>

#include <algorithm>
#include <chrono>
#include <tuple>

#include "core/error.h"
#include "memory/budget_exact.h"
#include "memory/budget_fill.h"

namespace mnemo {

namespace {

// Lets go at most this many times in one move, and gives a move up once its plan's cost reaches
// kSearchSlack times the current plan's (letting go costs recompute, the fill wins some back).
// ResNet-20 b128 at 0.5x `share` (docs/BENCHMARKS.md "The local search"): with a slack of 1.0 (a
// move that costs more before its fill is given up) the search stopped at 4.10 G; with 1.3 and
// more, at 3.99 G.
constexpr int kSearchRepairs = 6;
constexpr double kSearchSlack = 1.5;

double cost_of(const MirrorResult& r) { return r.planned.report.recompute_cost; }

// What the search has learnt of a plan it planned: whether it fits and what it costs. A move's
// fill often comes to a plan planned before, mostly another move's fill (on Inception-v3 at 0.4x,
// 308 of the 2489 plans the search built; docs/BENCHMARKS.md "The search's fills remembered").
// Both are functions of the plan alone (the same context and limits throughout one search), so a
// fill met again is compared without being built; the decisions are the same as planning it
// again, so the search takes the same moves. (The fills' own evaluations inside fill_to have a
// FillMemo of their own.)
struct ProbeOutcome {
  bool fits;
  double cost;
};
using ProbeMemo = PlanMemo<ProbeOutcome>;

// `x` kept back in `cur`, let go around the exact peak until it fits, filled: the result when it
// fits and costs less than `cur`.
std::optional<MirrorResult> try_move(const PlanContext& ctx, const MirrorResult& cur, int x, const BudgetSearchOptions& o, ProbeMemo* memo,
                                     FillMemo* fills, int* evaluations) {
  const Graph& fwd = ctx.fwd;
  const double bar = cost_of(cur);
  MirrorPlan t = cur.mirror;
  t[static_cast<size_t>(x)] = 0;
  t = ctx.apply(views_follow(fwd, std::move(t)));
  // Packed only when its live bytes fit the arena's limit (else it cannot fit: pruned), and only
  // until a packing fits (the plan taken is packed in full at the end of the search).
  auto plan_to_fit = [&](const MirrorPlan& m) {
    ++*evaluations;
    return ctx.evaluate(m, o.arena_limit, o.arena_limit);
  };
  auto fits = [&](const MirrorResult& r) { return !r.planned.report.pruned && r.planned.report.total_bytes <= o.limit; };
  for (int repair = 0;; ++repair) {
    MirrorResult r = plan_to_fit(t);
    if (memo) memo->add(t, {fits(r), cost_of(r)});
    if (cost_of(r) >= kSearchSlack * bar) return std::nullopt;
    if (fits(r)) {
      // What fits kept back, in both keep-back orders; the least cost that fits. A fill met before
      // is judged by what the memo holds; one that wins the move is planned if it was not here.
      const FillStart start = prepare_fill(ctx, t, r);
      double least = cost_of(r);
      std::optional<MirrorPlan> won;         // the fill that costs least, when one costs less than r
      std::optional<MirrorResult> won_plan;  // ... planned here (not when the memo judged it)
      for (int order = 0; order < 2; ++order) {
        std::optional<Fill> f = fill_to(ctx, start, fill_keeps(start, order, o.arena_limit), o.arena_limit, fills);
        if (!f || f->report.recompute_cost >= least) continue;
        std::optional<ProbeOutcome> known = memo ? memo->find(f->plan) : std::nullopt;
        std::optional<MirrorResult> filled;
        if (!known) {
          filled = plan_to_fit(f->plan);
          known = ProbeOutcome{fits(*filled), cost_of(*filled)};
          if (memo) memo->add(f->plan, *known);
        }
        if (known->fits && known->cost < least) least = known->cost, won = std::move(f->plan), won_plan = std::move(filled);
      }
      if (least >= bar) return std::nullopt;
      if (!won) return r;
      if (!won_plan) won_plan = plan_to_fit(*won);
      MNEMO_ASSERT(fits(*won_plan) && cost_of(*won_plan) == least) << "budget search: a remembered fill planned differently";
      return won_plan;
    }
    if (repair == kSearchRepairs) return std::nullopt;
    // The kept nodes whose values are live at the exact peak and first read by backward after
    // it (letting go of one read before the peak puts its recomputed copy there instead), the
    // least recompute cost per byte first, until their bytes cover the excess.
    const Graph& g = r.training.graph;
    const ExactPeak peak = exact_peak(r);
    std::vector<char> read_by_then(fwd.size(), 0);  // read by backward at or before the peak
    for (int id = static_cast<int>(r.training.num_forward); id <= peak.step && id < static_cast<int>(g.size()); ++id)
      for (const EntryRef& e : g.node(id).inputs)
        if (e.node >= 0 && static_cast<size_t>(e.node) < fwd.size()) read_by_then[static_cast<size_t>(e.node)] = 1;
    std::vector<std::tuple<double, int, int64_t>> go;  // (-key: the least cost per byte first, node, bytes at the peak)
    for (size_t v = 0; v < fwd.size(); ++v) {
      if (t[v] != 0 || static_cast<int>(v) == x || !fwd.node(static_cast<int>(v)).is(OpKind::compute) || read_by_then[v]) continue;
      if (const int64_t bytes = peak.bytes_of(static_cast<int>(v)); bytes > 0)
        go.push_back({-keep_back_key(fwd, static_cast<int>(v), ctx.mode.balance), static_cast<int>(v), bytes});
    }
    std::sort(go.begin(), go.end());
    // (Pruned: its live bytes over the arena's limit, at most its total over the limit.)
    const MemoryReport& rep = r.planned.report;
    int64_t over = rep.pruned ? rep.max_live_bytes - o.arena_limit : rep.total_bytes - o.limit;
    bool let_go = false;
    for (const auto& [key, v, bytes] : go) {
      if (over <= 0) break;
      t[static_cast<size_t>(v)] = 1, over -= bytes, let_go = true;
    }
    if (!let_go) return std::nullopt;
    t = ctx.apply(views_follow(fwd, std::move(t)));
  }
}

}  // namespace

BudgetSearch search_budget(const PlanContext& ctx, const MirrorResult& start, const BudgetSearchOptions& o) {
  const auto t0 = std::chrono::steady_clock::now();
  auto elapsed = [&] { return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count(); };
  const Graph& fwd = ctx.fwd;
  BudgetSearch out;
  MirrorResult cur = start;
  const size_t threads = static_cast<size_t>(o.batch > 0 ? o.batch : std::max(1, omp_get_max_threads()));
  // (At most 8192 plans each: 41 MB of keys on the 5005-node ResNet, whose search builds about
  // 380 plans in 30 s.)
  ProbeMemo probes;
  FillMemo fills;
  ProbeMemo* const memo = o.remember ? &probes : nullptr;
  double next_line = 1;
  auto report = [&] {
    if (!o.progress || elapsed() < next_line) return;
    next_line = elapsed() + 1;
    out.seconds = elapsed();
    o.progress(out, cost_of(cur));
  };
  while (elapsed() < o.seconds) {
    // The nodes the current plan recomputes, the most recompute cost per byte first.
    const std::vector<int> first = first_copies(cur, fwd.size());
    std::vector<std::pair<double, int>> order;
    for (size_t v = 0; v < fwd.size(); ++v)
      if (first[v] >= 0) order.push_back({keep_back_key(fwd, static_cast<int>(v), ctx.mode.balance), static_cast<int>(v)});
    std::sort(order.begin(), order.end());
    bool taken = false, whole = true;
    for (size_t i = 0; i < order.size();) {
      if (elapsed() >= o.seconds) {
        whole = false;
        break;
      }
      if (memo) memo->add(cur.mirror, {true, cost_of(cur)});  // (a fill often comes back to it)
      // A batch of moves from the current plan (nodes it still drops), one per thread.
      std::vector<size_t> batch;
      for (size_t j = i; j < order.size() && batch.size() < threads; ++j)
        if (cur.mirror[static_cast<size_t>(order[j].second)] != 0) batch.push_back(j);
      if (batch.empty()) break;
      std::vector<std::optional<MirrorResult>> moved(batch.size());
      std::vector<int> evaluations(batch.size(), 0);
      parallel_each(batch.size(), [&](size_t k) { moved[k] = try_move(ctx, cur, order[batch[k]].second, o, memo, o.remember ? &fills : nullptr, &evaluations[k]); });
      for (int e : evaluations) out.evaluations += e;
      i = batch.back() + 1;
      for (size_t k = 0; k < batch.size(); ++k) {
        ++out.moves;
        if (!moved[k]) continue;
        cur = std::move(*moved[k]);
        ++out.taken, taken = true;
        i = batch[k] + 1;  // the later moves of the batch started from the plan before
        break;
      }
      report();
    }
    if (!taken && whole) {
      out.local_optimum = true;
      break;
    }
  }
  if (out.taken > 0) {
    out.plan = ctx.evaluate(cur.mirror);  // (its moves' packings stopped once one fit)
    MNEMO_ASSERT(out.plan->planned.report.total_bytes <= o.limit) << "budget search: the plan taken does not fit when planned in full";
  }
  out.probes_remembered = probes.hits();
  out.remembered = out.probes_remembered + fills.hits();
  out.seconds = elapsed();
  return out;
}

}  // namespace mnemo
