// budget=SIZE: the family of mirror plans (the fast solver), its choice by exact plans, and the
// programme of memory/budget_exact.h (its LP bound, or the exact solver); the fills are in
// memory/budget_fill.cpp, the knapsack bound in memory/knapsack_bound.cpp.
// docs/MEMORY.md "budget=SIZE".
#include <omp.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <functional>
#include <map>
#include <mutex>
#include <numeric>
#include <optional>
#include <string>

#include "memory/budget_exact.h"
#include "memory/budget_fill.h"
#include "memory/budget_search.h"
#include "memory/liveness.h"
#include "memory/mirror_search.h"
#include "memory/optimal_checkpoints.h"

namespace mnemo {

namespace {

// Progress of a long plan on stderr (the 1001-layer ResNet's budget plans for about 10 s): from
// 1 s on, at most a line a second, from whichever thread gets there first; nothing on plans that
// take less.
class Progress {
 public:
  explicit Progress(std::string mode) : mode_(std::move(mode)) {}
  template <class What>  // () -> std::string, called only when a line is printed
  void operator()(const What& what) {
    const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0_).count();
    if (s < next_.load(std::memory_order_relaxed)) return;
    std::lock_guard<std::mutex> lock(mu_);
    if (s < next_.load()) return;
    next_ = s + 1;
    std::fprintf(stderr, "mnemo: %s: %.1f s: %s\n", mode_.c_str(), s, what().c_str());
  }

 private:
  const std::string mode_;
  const std::chrono::steady_clock::time_point t0_ = std::chrono::steady_clock::now();
  std::atomic<double> next_{1.0};
  std::mutex mu_;
};

// budget: the papers' solutions in the family (twice this many at most) and how far above the
// least objective the max-term loop collects them.
constexpr size_t kBudgetPaper = 8;
constexpr double kBudgetSlack = 4.0;
constexpr int kKeepBackPoints = 7;  // budget: points along each keep-back path
// budget: fill members: levels per doubling of live bytes, and members filled per level
constexpr int kFillSteps = 32;
// budget: levels filled above the first one at or above the arena limit (a fill at a level is
// then kept when its live bytes exceed the level this many below the one under it: with the
// levels close together, a fill that fits a level or two lower is kept, not dropped)
constexpr int kFillLevelsAbove = 2;
constexpr int kFillBases = 2;
// budget's fast solver: the time limit of its LP bound (CBC's limit is a quarter of it; Clp may not
// stop at it; a bound is taken only from an LP solved to optimality, else the knapsack bound)
constexpr double kBudgetLpSeconds = 60.0;
// ... and the backward gaps it models at the start (with the end of the forward pass and the 4
// fullest forward steps: up to 7 in all; the rounds below add the gaps its solutions overfill).
constexpr int kBudgetLpGaps = 2;
// ... and then its cutting rounds (docs/MEMORY.md "The programme"): at most this many, 4 gaps
// each, by default while the round's LP has at most this many columns (ResNet-56: 4 rounds, 0.35
// s in all; ResNet-152: 1 round, 0.1 s; the 5005-node ResNet's first LP is larger: none).
constexpr int kBudgetLpRounds = 64;
constexpr int64_t kBudgetLpRoundColumns = 6000;

// `kept` plus every dropped vertex in a group with an edge to T (the group backward needs first).
std::vector<int> with_tail(const CheckpointGraph& g, const std::vector<int>& kept) {
  const int T = g.target();
  std::vector<char> k(g.size(), 0);
  for (int v : kept) k[v] = 1;
  std::vector<int> stack;
  for (int p : g.pred[T])
    if (p > 0 && !k[p]) k[p] = 1, stack.push_back(p);
  while (!stack.empty()) {
    const int v = stack.back();
    stack.pop_back();
    for (const auto* list : {&g.succ[v], &g.pred[v]})
      for (int w : *list)
        if (w > 0 && w < T && !k[w]) k[w] = 1, stack.push_back(w);
  }
  std::vector<int> out;
  for (int v = 1; v < T; ++v)
    if (k[v]) out.push_back(v);
  return out;
}

// The members of `among` (indices into `reps`) that no other of them beats in both live bytes and
// recompute; of equal ones, the first.
std::vector<size_t> unbeaten(const std::vector<MemoryReport>& reps, const std::vector<size_t>& among) {
  std::vector<size_t> out;
  for (size_t i : among) {
    bool beaten = false;
    for (size_t j : among) {
      const MemoryReport &a = reps[i], &b = reps[j];
      beaten = beaten || (j != i && b.max_live_bytes <= a.max_live_bytes && b.recompute_cost <= a.recompute_cost &&
                          (b.max_live_bytes < a.max_live_bytes || b.recompute_cost < a.recompute_cost || j < i));
    }
    if (!beaten) out.push_back(i);
  }
  return out;
}

}  // namespace

MirrorResult plan_budget(const PlanContext& ctx) {
  const Graph& fwd = ctx.fwd;
  const EntryRef loss = ctx.loss;
  const MemoryMode& mode = ctx.mode;
  const Device* device = ctx.device;
  const std::map<int, int>& overrides = ctx.overrides;
  auto apply = [&](MirrorPlan m) { return ctx.apply(std::move(m)); };
  auto evaluate = [&](const MirrorPlan& m, int64_t prune_above = -1) { return ctx.evaluate(m, prune_above); };
  MirrorResult best;
  // The family: fixed for the graph (not for the budget), every member planned exactly.
  std::vector<MirrorPlan> plans;
  std::vector<SearchStep> log;
  auto add = [&](MirrorPlan m, const std::string& origin, double param, int count) {
    plans.push_back(apply(std::move(m)));
    SearchStep st;
    st.origin = origin, st.budget = param, st.kept_cuts = count;
    log.push_back(st);
  };
  add({}, "keep-all", 0, 0);
  add(drop_bn_relu_plan(fwd), "drop-bn-relu", 0, 0);
  const std::vector<Cut> cuts = find_cuts(fwd);
  // Chen's budgets, and a wider grid around sqrt(x y) (B/8 .. 8B) for more points between
  // keeping a cut everywhere and keeping few.
  std::vector<double> grid = sublinear_budgets(fwd, cuts);
  for (int k = -6; k <= 6; k += 2) grid.push_back(grid[1] * std::pow(2.0, k / 2.0));
  for (double b : grid) {
    int kept = 0;
    MirrorPlan m = budget_plan(fwd, cuts, b, nullptr, nullptr, &kept);
    add(std::move(m), "sublinear", b, kept);
  }
  const int levels = std::max(1, static_cast<int>(std::ceil(std::log2(static_cast<double>(cuts.size()) + 1.0))));
  for (int d = 1; d <= levels; ++d) add(recursive_plan(fwd, cuts, d), "recursive", d, 0);
  const CheckpointGraph cg = checkpoint_graph(fwd, loss.node);
  const DivisionTree tree = division_tree(cg);
  const OptimalSearch search = optimal_checkpoints(cg, tree, kBudgetSlack);
  // The papers' solutions: the kBudgetPaper least objectives and kBudgetPaper more spread
  // over the max terms (from few checkpoints to many), each also refined.
  const std::vector<size_t> order = by_objective(search);
  std::vector<size_t> pick;
  for (size_t i = 0; i < order.size() && i < kBudgetPaper; ++i) pick.push_back(order[i]);
  for (size_t k = 0; k < kBudgetPaper && !search.solutions.empty(); ++k) {
    const size_t i = k * (search.solutions.size() - 1) / std::max<size_t>(1, kBudgetPaper - 1);
    if (std::find(pick.begin(), pick.end(), i) == pick.end()) pick.push_back(i);
  }
  for (size_t i : pick) {
    const CheckpointSolution sol = solve_max_term(cg, tree, search.solutions[i].max_term);
    add(checkpoint_mirror_plan(cg, sol.checkpoints, fwd.size()), "paper", static_cast<double>(sol.max_term),
        static_cast<int>(sol.checkpoints.size()));
    log.back().objective_bytes = sol.objective();
    const CheckpointSolution r = refine_checkpoints(cg, sol);
    if (r.checkpoints != sol.checkpoints) {
      add(checkpoint_mirror_plan(cg, r.checkpoints, fwd.size()), "refined", static_cast<double>(sol.max_term),
          static_cast<int>(r.checkpoints.size()));
      log.back().objective_bytes = r.objective();
    }
    // The papers' plans also drop the group next to the loss, which backward recomputes right
    // after the forward pass made it: FLOPs for no memory. Each again with that group kept.
    for (const std::vector<int>* kept : {&sol.checkpoints, &r.checkpoints}) {
      const std::vector<int> tail = with_tail(cg, *kept);
      if (tail != *kept) add(checkpoint_mirror_plan(cg, tail, fwd.size()), kept == &sol.checkpoints ? "paper+tail" : "refined+tail",
                             static_cast<double>(sol.max_term), static_cast<int>(tail.size()));
    }
  }
  // Each member is first built and its liveness analysed, not packed (prune_above 0): its
  // recompute cost and live bytes (a lower bound of its arena). Only the members the choice
  // needs are then packed: the choice is the same as packing every member, so it is still a
  // function of the fixed family (monotone), at a fraction of the cost.
  // Packed members (member -> its full result).
  std::map<size_t, MirrorResult> packed;
  // The light reports and fills of this graph and mode, shared with the other SIZEs planned
  // with it (MemoryMode::budget_memo) or this plan's own.
  const std::shared_ptr<BudgetMemo> memo = mode.budget_memo ? mode.budget_memo : std::make_shared<BudgetMemo>();
  const bool remember = mode.budget_remember_fills;
  const int met_before = memo->reports.hits() + memo->fills.hits();
  // Light results of `ps`, and with them (on the same threads, first: they take longest) the
  // full results of members `full` of the family.
  Progress progress(mode.name);
  auto light = [&](const char* what, const std::vector<MirrorPlan>& ps, const std::vector<size_t>& full = {}) {
    std::vector<MemoryReport> out(ps.size());
    const std::vector<size_t> same = first_equal(ps);
    std::vector<size_t> todo;
    for (size_t i = 0; i < ps.size(); ++i)
      if (same[i] == i) todo.push_back(i);
    std::vector<MirrorResult> rs(full.size());
    std::atomic<size_t> done{0};
    const size_t total = full.size() + todo.size();
    parallel_each(total, [&](size_t k) {
      if (k < full.size()) {
        rs[k] = evaluate(plans[full[k]]);
      } else {
        const MirrorPlan& m = ps[todo[k - full.size()]];
        std::optional<MemoryReport> known = remember ? memo->reports.find(m) : std::nullopt;
        if (!known) {
          known = evaluate(m, 0).planned.report;
          if (remember) memo->reports.add(m, *known);
        }
        out[todo[k - full.size()]] = std::move(*known);
      }
      const size_t n = ++done;
      progress([&] { return std::to_string(n) + " of " + std::to_string(total) + " " + what + " scored"; });
    });
    for (size_t i = 0; i < ps.size(); ++i) out[i] = out[same[i]];
    for (size_t k = 0; k < full.size(); ++k) packed.emplace(full[k], std::move(rs[k]));
    return out;
  };
  // Full results of members `which`, planned in parallel.
  auto pack = [&](const std::vector<size_t>& which) {
    std::vector<MirrorResult> rs(which.size());
    parallel_each(which.size(), [&](size_t k) { rs[k] = evaluate(plans[which[k]]); });
    for (size_t k = 0; k < which.size(); ++k) packed.emplace(which[k], std::move(rs[k]));
    progress([&] { return std::to_string(packed.size()) + " of " + std::to_string(plans.size()) + " members packed"; });
  };
  // Keep-all packed beside the light results: the limit (budget=0.5x) and what the step needs
  // beside its arena.
  std::vector<MemoryReport> reps = light("distinct members", plans, {0});
  // Keep-all as `share` plans it (its order finished, its exact placement): budget=Nx is a factor
  // of the total `mnemo plan --memory share` reports, and a SIZE that holds it chooses it (nothing
  // recomputes less). Its best-fit packing can be above that total: budget at share's own total
  // chose a plan that recomputed (4.1% on a small ResNet). The family's other members are
  // compared by their best-fit totals (the plan chosen is placed exactly afterwards, plan_mirror).
  ctx.finish_order(packed.at(0));
  ctx.place(packed.at(0), mode.placement_seconds);
  reps[0] = packed.at(0).planned.report;
  const MemoryReport keep_all = packed.at(0).planned.report;
  const int64_t limit = mode.budget_bytes > 0 ? mode.budget_bytes
                                              : static_cast<int64_t>(mode.budget_ratio * static_cast<double>(keep_all.total_bytes));
  const int64_t beside = keep_all.total_bytes - keep_all.arena_bytes;  // the same for every member
  const int64_t arena_limit = limit - beside;
  // Keep-back paths: from each of Chen's and the recursive plans that no other of them beats in
  // both live bytes and recompute, the dropped nodes kept back, the most recompute cost per
  // byte first; points along each path at fractions 2^(-k/2) of the dropped nodes, k = 1..7
  // (8.8% .. 70.7%). Then the same in the chains order (chain_charges: what keeping a node back
  // also saves counted too; "keep-back+chains", members for the choice only, not for the fills'
  // ladder and bases below). They depend on the graph only, so the family is still fixed.
  {
    const size_t base_members = plans.size();
    auto chen = [&](size_t i) { return log[i].origin == "sublinear" || log[i].origin == "recursive"; };
    const std::vector<size_t> same = first_equal(plans);
    std::vector<size_t> chens;
    for (size_t i = 0; i < base_members; ++i)
      if (chen(i) && same[i] == i) chens.push_back(i);
    const std::vector<size_t> bases = unbeaten(reps, chens);
    std::vector<MirrorPlan> paths;
    // The chains order's charges of each base (chain_charges), from its light result.
    std::vector<std::vector<double>> charges(bases.size());
    if (!mode.budget_first_order_only)
      parallel_each(bases.size(), [&](size_t k) { charges[k] = chain_charges(ctx, evaluate(plans[bases[k]], 0)); });
    const size_t orders = mode.budget_first_order_only ? 1 : 2;
    for (size_t pass = 0; pass < orders * bases.size(); ++pass) {
      const bool with_saved = pass >= bases.size();
      const size_t b = pass % bases.size(), p = bases[b];
      const MirrorPlan& base = plans[p];
      if (with_saved && std::all_of(charges[b].begin(), charges[b].end(), [](double c) { return c == 0; })) continue;  // (one order)
      std::vector<std::pair<double, int>> dropped;
      for (size_t v = 0; v < fwd.size(); ++v) {
        const Node& node = fwd.node(static_cast<int>(v));
        if (!base[v] || !node.is(OpKind::compute)) continue;
        dropped.push_back({keep_back_key(fwd, static_cast<int>(v), ctx.mode.balance, with_saved ? charges[b][v] : 0.0), static_cast<int>(v)});
      }
      std::sort(dropped.begin(), dropped.end());
      for (int k = kKeepBackPoints; k >= 1; --k) {
        const size_t j = static_cast<size_t>(std::ceil(static_cast<double>(dropped.size()) * std::pow(2.0, -k / 2.0)));
        if (j == 0 || j >= dropped.size()) continue;
        MirrorPlan m = base;
        for (size_t i = 0; i < j; ++i) m[dropped[i].second] = 0;
        paths.push_back(apply(views_follow(fwd, std::move(m))));
        SearchStep st;
        st.origin = with_saved ? "keep-back+chains" : "keep-back", st.budget = static_cast<double>(j), st.kept_cuts = log[p].kept_cuts;
        log.push_back(st);
      }
    }
    const std::vector<MemoryReport> more = light("keep-back members", paths);
    for (size_t k = 0; k < paths.size(); ++k) plans.push_back(std::move(paths[k])), reps.push_back(more[k]);
  }
  auto for_fills = [&](size_t i) { return log[i].origin != "keep-back+chains"; };
  const int threads = std::max(1, omp_get_max_threads());
  // Packs the members of `order`, a batch of `threads` at a time, up to the first one `wanted`
  // (asked with what is packed so far) declines; that batch is still packed. Packing more
  // than needed changes nothing (the choice below looks at every packed member), so the
  // choice does not depend on the thread count.
  auto pack_in_order = [&](const std::vector<size_t>& order, const std::function<bool(size_t)>& wanted) {
    for (size_t next = 0; next < order.size();) {
      std::vector<size_t> batch;
      bool more = true;
      while (next < order.size() && static_cast<int>(batch.size()) < threads) {
        if (!(more = wanted(order[next]))) break;
        if (!packed.count(order[next])) batch.push_back(order[next]);
        ++next;
      }
      pack(batch);
      if (!more) return;
    }
  };
  auto total_of = [&](size_t i) { return packed.at(i).planned.report.total_bytes; };
  // The least recompute cost that fits among the members so far; ties: the smaller total, then
  // the earlier member. Members whose live bytes exceed the arena limit cannot fit; the others
  // are packed by recompute until one fits (and those with its recompute, for the tie).
  auto choose = [&]() {
    std::vector<size_t> by_cost;
    for (size_t i = 0; i < plans.size(); ++i)
      if (reps[i].max_live_bytes <= arena_limit) by_cost.push_back(i);
    std::stable_sort(by_cost.begin(), by_cost.end(), [&](size_t a, size_t b) { return reps[a].recompute_cost < reps[b].recompute_cost; });
    std::optional<size_t> chosen;
    auto better = [&](size_t i) {
      const MemoryReport& r = packed.at(i).planned.report;
      if (r.total_bytes > limit) return false;
      if (!chosen) return true;
      const MemoryReport& c = packed.at(*chosen).planned.report;
      return r.recompute_cost < c.recompute_cost || (r.recompute_cost == c.recompute_cost && r.total_bytes < c.total_bytes) ||
             (r.recompute_cost == c.recompute_cost && r.total_bytes == c.total_bytes && i < *chosen);
    };
    pack_in_order(by_cost, [&](size_t i) {
      for (const auto& [j, r] : packed)
        if (reps[j].max_live_bytes <= arena_limit && better(j)) chosen = j;
      return !chosen || reps[i].recompute_cost <= packed.at(*chosen).planned.report.recompute_cost;
    });
    for (const auto& [j, r] : packed)
      if (reps[j].max_live_bytes <= arena_limit && better(j)) chosen = j;
    return chosen;
  };
  // Fill members (docs/MEMORY.md "The family"): at fixed live-bytes levels (a ladder from the
  // family's least live bytes to keep-all's, kFillSteps a doubling, and the live bytes of each
  // member no other beats in both live bytes and recompute), the kFillBases members of least
  // recompute within the level, each filled up to it (fill_to), as it is and with the nodes that
  // are cheap to recompute (drop-bn-relu's) dropped first: Chen's cuts keep block outputs that
  // are a ReLU away from a convolution the fill can keep instead. Only the levels up to
  // kFillLevelsAbove above the first one at or above the arena limit are filled, and a fill at
  // level j is kept only when its live bytes exceed level j - 1 - kFillLevelsAbove: the families
  // of two budgets are then nested (the smaller budget's is part of the larger's), and a fill only
  // the larger budget's family has does not fit the smaller budget (the smaller one's first level
  // at or above its limit is at most that level), so the choice is still monotone (docs/MEMORY.md;
  // the invariant is tested in MirrorPlanner.BudgetFillsStayWithinTheirLevelAndTheSweepStaysMonotone).
  // The levels are filled from the top down, and the choice is made after each: a level whose
  // knapsack bound (no plan with live bytes within it recomputes less) exceeds the recompute of
  // the member chosen so far cannot give the choice, nor can any level below it, so they are
  // not filled. The choice is the one the whole family gives (docs/MEMORY.md).
  std::optional<size_t> chosen = choose();
  // The knapsack bound of the keep-all training graph (which values backward reads does not
  // depend on the plan), asked at every level below and at the arena limit.
  const KnapsackBound knapsack(fwd, packed.at(0).training, mode.balance);
  int fill_levels = 0, skipped_levels = 0, fill_repairs = 0, fill_remembered = 0;
  {
    // The ladder and the bases come from the members before the chains order's keep-back paths
    // (which join the choice only): with those paths the family only grows, so no choice is
    // worse than without them.
    std::vector<size_t> all;
    for (size_t i = 0; i < reps.size(); ++i)
      if (for_fills(i)) all.push_back(i);
    const int64_t lo = reps[*std::min_element(all.begin(), all.end(), [&](size_t a, size_t b) {
                         return reps[a].max_live_bytes < reps[b].max_live_bytes;
                       })].max_live_bytes;
    const int64_t hi = reps[0].max_live_bytes;
    std::vector<int64_t> levels;
    for (int k = 1; lo > 0; ++k) {
      const auto level = static_cast<int64_t>(static_cast<double>(lo) * std::pow(2.0, static_cast<double>(k) / kFillSteps));
      if (level >= hi) break;
      levels.push_back(level);
    }
    for (size_t i : unbeaten(reps, all))
      if (reps[i].recompute_cost > 0 && reps[i].max_live_bytes > lo) levels.push_back(reps[i].max_live_bytes);
    std::sort(levels.begin(), levels.end());
    levels.erase(std::unique(levels.begin(), levels.end()), levels.end());
    const auto top = std::lower_bound(levels.begin(), levels.end(), arena_limit);
    if (levels.end() - top > kFillLevelsAbove + 1) levels.erase(top + kFillLevelsAbove + 1, levels.end());
    std::vector<size_t> by_recompute(plans.size());
    std::iota(by_recompute.begin(), by_recompute.end(), size_t{0});
    std::stable_sort(by_recompute.begin(), by_recompute.end(),
                     [&](size_t a, size_t b) { return reps[a].recompute_cost < reps[b].recompute_cost; });
    // Starts: (member, with its cheap nodes dropped) -> index, prepared when a level first needs
    // them; jobs per level: (start, level, the level kFillLevelsAbove + 1 below it, or lo).
    std::map<std::pair<size_t, bool>, size_t> start_of;
    std::vector<std::pair<size_t, bool>> start_keys;
    struct Job {
      size_t start;
      int64_t level, below;
    };
    std::vector<std::vector<Job>> jobs(levels.size());
    for (size_t l = 0; l < levels.size(); ++l) {
      int taken = 0;
      for (size_t i : by_recompute) {
        if (taken == kFillBases) break;
        if (!for_fills(i) || reps[i].max_live_bytes > levels[l]) continue;
        ++taken;
        for (bool cheap : {false, true}) {
          const auto [it, fresh] = start_of.emplace(std::make_pair(i, cheap), start_keys.size());
          if (fresh) start_keys.push_back(it->first);
          jobs[l].push_back({it->second, levels[l], l > kFillLevelsAbove ? levels[l - 1 - kFillLevelsAbove] : lo});
        }
      }
    }
    const MirrorPlan cheap_nodes = drop_bn_relu_plan(fwd);

    std::vector<std::optional<FillStart>> starts(start_keys.size());
    for (size_t l = levels.size(); l-- > 0;) {
      if (chosen && !mode.budget_fill_every_level && knapsack.at(levels[l]) > reps[*chosen].recompute_cost * (1 + 1e-9)) {
        skipped_levels = static_cast<int>(l) + 1;
        break;
      }
      ++fill_levels;
      progress([&] { return "filling live-bytes level " + std::to_string(levels.size() - l) + " of at most " + std::to_string(levels.size()) + " (from the top)"; });
      std::vector<size_t> todo;
      for (const Job& job : jobs[l])
        if (!starts[job.start] && std::find(todo.begin(), todo.end(), job.start) == todo.end()) todo.push_back(job.start);
      parallel_each(todo.size(), [&](size_t k) {
        const auto [i, cheap] = start_keys[todo[k]];
        MirrorPlan m = plans[i];
        if (cheap) {
          for (size_t v = 0; v < m.size(); ++v) m[v] = std::max(m[v], cheap_nodes[v]);
          m = apply(views_follow(fwd, std::move(m)));
        }
        starts[todo[k]] = prepare_fill(ctx, std::move(m));
      });
      // Each job filled in both candidate orders (the second only where its keeps differ: the
      // same keeps give the same plan).
      std::vector<std::vector<int>> keeps(2 * jobs[l].size());
      std::vector<size_t> fill_now;
      for (size_t k = 0; k < keeps.size(); ++k) {
        const Job& job = jobs[l][k / 2];
        const FillStart& st = *starts[job.start];
        if (st.live_bytes > job.level || (k % 2 == 1 && mode.budget_first_order_only)) continue;
        keeps[k] = fill_keeps(st, static_cast<int>(k % 2), job.level);
        if (k % 2 == 0 || keeps[k] != keeps[k - 1]) fill_now.push_back(k);
      }
      std::vector<std::optional<Fill>> filled(keeps.size());
      parallel_each(fill_now.size(), [&](size_t i) {
        const size_t k = fill_now[i];
        filled[k] = fill_to(ctx, *starts[jobs[l][k / 2].start], std::move(keeps[k]), jobs[l][k / 2].level,
                            remember ? &memo->fills : nullptr);
      });
      for (const std::optional<Fill>& f : filled) fill_repairs += f && f->repaired;
      bool added = false;
      for (size_t k = 0; k < filled.size(); ++k) {
        const Job& job = jobs[l][k / 2];
        if (!filled[k] || filled[k]->report.max_live_bytes <= job.below) continue;
        if (std::find(plans.begin(), plans.end(), filled[k]->plan) != plans.end()) continue;  // (two bases or orders, one plan)
        plans.push_back(std::move(filled[k]->plan)), reps.push_back(filled[k]->report);
        SearchStep st;
        st.origin = std::string(start_keys[job.start].second ? "fill+cheap" : "fill") + (k % 2 ? "+chains" : "");
        st.budget = static_cast<double>(job.level);
        st.kept_cuts = log[start_keys[job.start].first].kept_cuts;
        log.push_back(st);
        added = true;
      }
      if (added) chosen = choose();
    }
  }
  // (A fill at one level is often the fill at the next, or another job's repair: not built again;
  // with a memo shared across SIZEs, also the members another SIZE built.)
  fill_remembered = memo->reports.hits() + memo->fills.hits() - met_before;
  // The least total: members by live bytes, packed until the next one's live bytes reach the
  // least arena found (its arena cannot be smaller).
  std::vector<size_t> by_live(plans.size());
  std::iota(by_live.begin(), by_live.end(), size_t{0});
  std::stable_sort(by_live.begin(), by_live.end(), [&](size_t a, size_t b) { return reps[a].max_live_bytes < reps[b].max_live_bytes; });
  std::optional<size_t> least_total;
  pack_in_order(by_live, [&](size_t i) {
    for (const auto& [j, r] : packed)
      if (!least_total || r.planned.report.total_bytes < total_of(*least_total) ||
          (r.planned.report.total_bytes == total_of(*least_total) && j < *least_total))
        least_total = j;
    return !least_total || reps[i].max_live_bytes + beside <= total_of(*least_total);
  });
  for (const auto& [j, r] : packed)
    if (r.planned.report.total_bytes < total_of(*least_total) || (r.planned.report.total_bytes == total_of(*least_total) && j < *least_total))
      least_total = j;
  const int64_t least = total_of(*least_total);
  if (least > limit)
    MNEMO_FAIL() << "memory mode '" << mode.name << "': no plan fits in " << format_bytes(limit) << " (" << limit
                 << " bytes); the least total found is " << format_bytes(least) << " (" << least << " bytes, a "
                 << log[*least_total].origin << " plan): use budget=" << least << " or more";
  MNEMO_ASSERT(chosen) << "budget: the least total fits, so some member does";
  for (size_t i = 0; i < plans.size(); ++i) {
    SearchStep& st = log[i];
    st.max_live_bytes = reps[i].max_live_bytes, st.recompute_flops = reps[i].recompute_flops, st.recompute_cost = reps[i].recompute_cost;
    const auto it = packed.find(i);
    st.pruned = it == packed.end();
    st.too_big = reps[i].max_live_bytes > arena_limit;  // (known without packing)
    if (st.pruned) continue;
    const MemoryReport& rep = it->second.planned.report;
    st.feature_map_bytes = rep.feature_map_bytes, st.workspace_bytes = rep.workspace_bytes, st.arena_bytes = rep.arena_bytes;
    st.total_bytes = rep.total_bytes, st.fits = rep.total_bytes <= limit;
  }
  const MirrorResult& keep_result = packed.at(0);
  double bound = knapsack.at(arena_limit);
  auto zero_one = [](const MirrorPlan& m) { return std::all_of(m.begin(), m.end(), [](int k) { return k <= 1; }); };
  const bool chosen_01 = zero_one(plans[*chosen]);
  // The local search (`:search`, and `:exact` for up to half its time): from the family's choice,
  // moves planned exactly (memory/budget_search.h). Not with per-node overrides (a move could
  // undo one).
  std::optional<MirrorResult> found;
  std::string found_by;
  const bool exact = mode.budget_solver == MemoryMode::Solver::exact;
  BudgetSearch bs;
  const double family_cost = packed.at(*chosen).planned.report.recompute_cost;
  const bool searched = mode.budget_solver != MemoryMode::Solver::fast && overrides.empty();
  if (searched) {
    BudgetSearchOptions so;
    so.limit = limit, so.arena_limit = arena_limit;
    so.seconds = exact ? mode.budget_seconds / 2 : mode.budget_seconds;
    so.progress = [&](const BudgetSearch& s, double cost) {
      std::fprintf(stderr, "mnemo: budget search: %.1f s: %d moves tried, %d taken: least recompute cost that fits %.4g G\n", s.seconds,
                   s.moves, s.taken, cost / 1e9);
    };
    bs = search_budget(ctx, packed.at(*chosen), so);
    if (bs.plan) found = std::move(bs.plan), found_by = "search";
  }
  // The programme of memory/budget_exact.h: solved (exact) or its LP relaxation (fast), both
  // a proven bound. Per-node overrides fall outside its plans: then only the knapsack bound.
  ExactBudget eb;
  // The programme models the default schedule order: with another order, only the knapsack bound
  // (the forward pass still runs first, which is all it assumes).
  const bool programme = overrides.empty() && mode.order == ScheduleOrder::default_order;
  if (programme) {
    progress([] { return std::string("the programme's lower bound"); });
    ExactBudgetOptions eo;
    eo.arena_limit = arena_limit;
    eo.device = device;
    eo.balance = mode.balance;
    // (The programme's plans are 0/1; a recursive member recomputes some nodes more than
    // once, so it is not an incumbent of the programme: the programme then seeks any plan.)
    eo.incumbent_cost = found && zero_one(found->mirror) ? found->planned.report.recompute_cost
                        : chosen_01                           ? packed.at(*chosen).planned.report.recompute_cost
                                                              : -1;
    eo.integer = exact;
    // (CBC does not stop an LP at its time limit: `:fast=SECONDS` or `:bound=SECONDS` bounds the
    // rounds, not a solve.)
    eo.seconds = exact ? std::max(mode.budget_seconds / 2, mode.budget_seconds - bs.seconds)
                       : kBudgetLpSeconds + std::max(0.0, mode.budget_bound_seconds);
    if (!exact) eo.max_gaps = kBudgetLpGaps;
    eo.lp_max_gaps = kBudgetLpGaps;  // (`:exact`'s LP rounds: the fast solver's)
    // The LP's cutting rounds (for `:exact`, before its programme, which starts from the gaps
    // they model): by default while its LP stays small (the same bound on every machine);
    // `:fast=SECONDS` or `:bound=SECONDS` (fast and search): for up to SECONDS (0: none).
    // The integer programme's root node (CBC's cuts): `:fast=SECONDS` / `:bound=SECONDS` runs it first, on the gaps
    // the rounds start from, and again after them with the time left; `:exact`, after the rounds,
    // before its programme. Not by default: it takes 0.3-0.9 s on the deep ResNets but 2.9 s on
    // the 2x512 LSTM and 17.8 s on the paper's (at 0.7x and 0.6x), and a time limit would make
    // the default bound depend on the machine (docs/MEMORY.md "The root's cuts").
    eo.lp_rounds = kBudgetLpRounds;
    if (mode.budget_bound_seconds >= 0) {
      eo.lp_round_seconds = mode.budget_bound_seconds;
    } else {
      eo.lp_round_columns = kBudgetLpRoundColumns;
    }
    using Root = ExactBudgetOptions::Root;
    eo.root = exact ? Root::after_rounds : mode.budget_bound_seconds >= 0 ? Root::first : Root::never;
    if (exact)
      eo.progress = [next = 1.0](int solves, double seconds, double best_cost, double bound_cost) mutable {
        if (seconds < next) return;  // from 1 s on, at most one line a second
        next = seconds + 1;
        std::fprintf(stderr, "mnemo: budget exact: %d solves, %.1f s: least recompute cost that fits %.4g G, bound %.4g G\n",
                     solves, seconds, best_cost / 1e9, bound_cost / 1e9);
      };
    auto check = [&](const MirrorPlan& m) {
      MirrorResult r = evaluate(apply(m));
      BudgetCheck c;
      c.fits = r.planned.report.total_bytes <= limit;
      c.excess_bytes = std::max<int64_t>(0, r.planned.report.total_bytes - limit);
      c.recompute_cost = r.planned.report.recompute_cost;
      c.peak_gap = budget_peak_gap(r.training, analyze_liveness(r.training.graph, mode.alloc != AllocMode::none, r.planned.plan.kernels));
      for (size_t id = r.training.num_forward; id < r.training.graph.size(); ++id)
        if (const Node& n = r.training.graph.node(static_cast<int>(id)); n.role == NodeRole::recompute) c.recomputed.push_back(n.source);
      if (c.fits && (!found || c.recompute_cost < found->planned.report.recompute_cost)) found = std::move(r), found_by = "exact";
      return c;
    };
    eb = solve_budget_exact(fwd, keep_result.training, eo, check);
  }
  if (found && found->planned.report.recompute_cost < packed.at(*chosen).planned.report.recompute_cost) {
    const MemoryReport& rep = found->planned.report;
    SearchStep st;
    st.origin = found_by, st.feature_map_bytes = rep.feature_map_bytes, st.workspace_bytes = rep.workspace_bytes;
    st.arena_bytes = rep.arena_bytes, st.recompute_flops = rep.recompute_flops, st.recompute_cost = rep.recompute_cost;
    st.total_bytes = rep.total_bytes;
    st.fits = true, st.chosen = true;
    log.push_back(st);
    best = std::move(*found);
  } else {
    log[*chosen].chosen = true;
    best = std::move(packed.at(*chosen));
  }
  best.search = std::move(log);
  // The programme's bound covers 0/1 plans; the knapsack bound every plan. With a recursive
  // plan chosen, only the latter is a bound on what was chosen among.
  best.bound_over_01 = zero_one(best.mirror) && std::isfinite(eb.bound_cost) && eb.bound_cost > bound;
  if (best.bound_over_01) bound = eb.bound_cost;
  // A bound above a plan that fits is a bug in the programme (it admits every plan at no more
  // than its cost, `BudgetExact.AdmitsEveryPlanAtItsOwnArena`): said, not hidden by the cap.
  if (bound > best.planned.report.recompute_cost * (1 + 1e-6) + 1e3)
    std::fprintf(stderr, "mnemo: budget: warning: the proven bound %.6g is above the recompute cost of the plan chosen (%.6g), which fits: a bug in the bound\n",
                 bound, best.planned.report.recompute_cost);
  best.proven_bound_cost = bound;
  best.lower_bound_cost = std::min(bound, best.planned.report.recompute_cost);
  best.budget_bytes = limit;
  best.least_feasible = least;
  best.fill_levels = fill_levels, best.fill_levels_skipped = skipped_levels, best.fill_repairs = fill_repairs;
  best.fill_remembered = fill_remembered;
  best.solver_status = !overrides.empty() ? "no programme (per-node mirror overrides): knapsack bound"
                       : !programme ? std::string("no programme (it models the default schedule order): knapsack bound")
                       : mode.budget_solver == MemoryMode::Solver::fast   ? "fast (the family), bound: programme " + eb.status
                       : mode.budget_solver == MemoryMode::Solver::search ? "search (the family's choice, then the local search), bound: programme " + eb.status
                                                                          : "exact programme: " + eb.status;
  if (searched) {
    best.search_moves = bs.moves, best.search_taken = bs.taken, best.search_evaluations = bs.evaluations;
    best.search_remembered = bs.remembered;
    best.search_local_optimum = bs.local_optimum, best.local_search_seconds = bs.seconds;
    best.search_from_cost = family_cost;
  }
  best.solver_solves = eb.solves, best.solver_cuts = eb.cuts, best.solver_gaps = eb.gaps, best.solver_seconds = eb.seconds;
  return best;
}

}  // namespace mnemo
