// Mirror planners (see mirror_planner.h).
#include "memory/mirror_planner.h"

#include <omp.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <exception>
#include <functional>
#include <map>
#include <numeric>
#include <optional>

#include "memory/budget_exact.h"
#include "memory/liveness.h"
#include "memory/optimal_checkpoints.h"

namespace mnemo {
namespace {

bool is_leaf(const Node& n) { return n.is(OpKind::input) || n.is(OpKind::param); }

int64_t node_bytes(const Node& n) {
  if (n.op->kind != OpKind::compute) return 0;  // views share their input's bytes
  int64_t b = 0;
  for (const TensorType& t : n.outputs) b += static_cast<int64_t>(t.bytes());
  return b;
}

}  // namespace

namespace {

// budget=SIZE: "2GiB", "900MB", "123456789", "1.5 GiB", "0.5x".
void parse_budget(const std::string& name, MemoryMode& m) {
  std::string text = name.substr(7);
  auto fail = [&]() {
    MNEMO_FAIL() << "memory mode '" << name
                 << "': expected budget=SIZE with SIZE a positive size like 2GiB, 900MB or 123456789 (bytes), or a factor of "
                    "share's total like 0.5x, optionally followed by :fast, :exact or :exact=SECONDS";
  };
  if (const size_t colon = text.find(':'); colon != std::string::npos) {
    const std::string solver = text.substr(colon + 1);
    text.resize(colon);
    if (solver == "fast") {
      m.budget_solver = MemoryMode::Solver::fast;
    } else if (solver == "exact") {
      m.budget_solver = MemoryMode::Solver::exact;
    } else if (solver.rfind("exact=", 0) == 0) {
      m.budget_solver = MemoryMode::Solver::exact;
      size_t pos = 0;
      try {
        m.budget_seconds = std::stod(solver.substr(6), &pos);
      } catch (...) {
        fail();
      }
      if (pos != solver.size() - 6 || !std::isfinite(m.budget_seconds) || m.budget_seconds <= 0 || m.budget_seconds > 86400) fail();
    } else {
      fail();
    }
  }
  size_t pos = 0;
  double value = 0;
  try {
    value = std::stod(text, &pos);
  } catch (...) {
    fail();
  }
  std::string unit = text.substr(pos);
  unit.erase(0, unit.find_first_not_of(' '));
  if (!std::isfinite(value) || value <= 0) fail();
  if (unit == "x") {
    if (value > 1e6) fail();
    m.budget_ratio = value;
    return;
  }
  static const std::map<std::string, double> units = {
      {"", 1}, {"B", 1}, {"KB", 1e3}, {"MB", 1e6}, {"GB", 1e9}, {"TB", 1e12},
      {"KiB", 1024.0}, {"MiB", 1048576.0}, {"GiB", 1073741824.0}, {"TiB", 1099511627776.0}};
  const auto u = units.find(unit);
  if (u == units.end()) fail();
  const double bytes = value * u->second;
  if (bytes < 1 || bytes > 9.0e18) fail();
  m.budget_bytes = static_cast<int64_t>(bytes);
}

}  // namespace

MemoryMode parse_memory_mode(const std::string& name) {
  MemoryMode m;
  m.name = name;
  if (name == "none" || name == "inplace" || name == "share") {
    m.alloc = parse_alloc_mode(name);
    return m;
  }
  if (name == "drop-bn-relu") m.mirror = MirrorStrategy::drop_bn_relu;
  else if (name == "sublinear") m.mirror = MirrorStrategy::sublinear;
  else if (name == "recursive") m.mirror = MirrorStrategy::recursive;
  else if (name == "optimal") m.mirror = MirrorStrategy::optimal;
  else if (name.rfind("recursive=", 0) == 0) {
    m.mirror = MirrorStrategy::recursive;
    try {
      size_t pos = 0;
      m.depth = std::stoi(name.substr(10), &pos);
      MNEMO_CHECK(pos == name.size() - 10 && m.depth >= 1 && m.depth <= 64) << "bad depth";
    } catch (...) {
      MNEMO_FAIL() << "memory mode '" << name << "': expected recursive=DEPTH with DEPTH in [1, 64]";
    }
  } else if (name.rfind("budget=", 0) == 0) {
    m.mirror = MirrorStrategy::budget;
    parse_budget(name, m);
  } else {
    MNEMO_FAIL() << "unknown memory mode '" << name
                 << "' (expected none, inplace, share, drop-bn-relu, sublinear, recursive, recursive=DEPTH, optimal or budget=SIZE)";
  }
  return m;
}

std::vector<std::string> all_memory_modes() { return {"none", "inplace", "share", "drop-bn-relu", "sublinear", "recursive", "optimal"}; }

std::vector<Cut> find_cuts(const Graph& g) {
  const int n = static_cast<int>(g.size());
  std::vector<int> last(n, -1);
  for (int v = 0; v < n; ++v)
    for (const EntryRef& e : g.node(v).inputs) last[e.node] = std::max(last[e.node], v);
  // Sweep: values enter at their producer and leave after their last forward reader.
  std::vector<std::vector<int>> leave(n + 1);
  std::vector<Cut> all;
  std::vector<int64_t> bytes_at(n, 0);
  std::vector<bool> alive(n, false);
  int64_t live_bytes = 0;
  for (int p = 0; p < n; ++p) {
    const Node& node = g.node(p);
    if (!is_leaf(node) && last[p] > p) {
      alive[p] = true;
      live_bytes += node_bytes(node);
      leave[last[p]].push_back(p);
    }
    for (int u : leave[p]) alive[u] = false, live_bytes -= node_bytes(g.node(u));
    bytes_at[p] = live_bytes;
  }
  // Candidates: local minima of the crossing bytes (window of 4 positions each side), at
  // positions after a non-leaf node, with something crossing.
  const int w = 4;
  std::vector<int> order;
  for (int p = 0; p < n; ++p)
    if (!is_leaf(g.node(p))) order.push_back(p);
  std::vector<bool> is_candidate(n, false);
  for (size_t i = 0; i < order.size(); ++i) {
    const int p = order[i];
    if (bytes_at[p] == 0) continue;
    bool min = true;
    for (size_t j = i >= static_cast<size_t>(w) ? i - w : 0; j < std::min(order.size(), i + w + 1) && min; ++j)
      if (bytes_at[order[j]] < bytes_at[p]) min = false;
    is_candidate[p] = min;
  }
  // Materialise the crossing sets of the candidates (second sweep).
  std::fill(alive.begin(), alive.end(), false);
  std::vector<int> live_list;
  for (int p = 0; p < n; ++p) {
    const Node& node = g.node(p);
    if (!is_leaf(node) && last[p] > p) alive[p] = true, live_list.push_back(p);
    for (int u : leave[p]) alive[u] = false;
    if (!is_candidate[p]) continue;
    live_list.erase(std::remove_if(live_list.begin(), live_list.end(), [&](int u) { return !alive[u]; }), live_list.end());
    all.push_back({p, live_list, bytes_at[p]});
  }
  return all;
}

MirrorPlan drop_bn_relu_plan(const Graph& g) {
  MirrorPlan m(g.size(), 0);
  for (size_t v = 0; v < g.size(); ++v) {
    if (g.node(static_cast<int>(v)).op->traits.cheap_recompute) m[v] = 1;
  }
  return m;
}

MirrorPlan budget_plan(const Graph& g, const std::vector<Cut>& cuts, double budget, double* x_out, double* y_out, int* kept) {
  MirrorPlan m(g.size(), 0);
  for (size_t v = 0; v < g.size(); ++v)
    if (!is_leaf(g.node(static_cast<int>(v)))) m[v] = 1;
  double temp = 0, x = 0, y = 0;
  size_t c = 0;
  int k = 0;
  int last_cut = -1;
  for (size_t p = 0; p < g.size(); ++p) {
    const Node& node = g.node(static_cast<int>(p));
    if (is_leaf(node)) continue;
    temp += static_cast<double>(node_bytes(node));
    while (c < cuts.size() && cuts[c].position < static_cast<int>(p)) ++c;
    if (c < cuts.size() && cuts[c].position == static_cast<int>(p) && temp > budget) {
      for (int u : cuts[c].keep) m[u] = 0;
      last_cut = static_cast<int>(p);
      x += static_cast<double>(cuts[c].bytes);
      y = std::max(y, temp);
      temp = 0;
      ++k;
    }
  }
  // The segment after the last kept cut is the first one backward needs: recomputing it would
  // run right after the forward produced it, at no saving in peak memory. Keep it.
  for (size_t v = static_cast<size_t>(last_cut + 1); v < g.size(); ++v) m[v] = 0;
  if (x_out) *x_out = x;
  if (y_out) *y_out = std::max(y, temp);
  if (kept) *kept = k;
  return m;
}

MirrorPlan recursive_plan(const Graph& g, const std::vector<Cut>& cuts, int depth, int k) {
  MNEMO_ASSERT(k >= 1) << "recursive plan: k must be >= 1";
  const int n_cuts = static_cast<int>(cuts.size());
  if (depth <= 0) depth = std::max(1, static_cast<int>(std::ceil(std::log(n_cuts + 1.0) / std::log(k + 1.0))));
  MirrorPlan m(g.size(), 0);
  for (size_t v = 0; v < g.size(); ++v)
    if (!is_leaf(g.node(static_cast<int>(v)))) m[v] = depth;
  // Cuts of level L (1 = top) get m = L - 1: the k cuts splitting [lo, hi) into k + 1 parts.
  struct Range {
    int lo, hi, level;
  };
  std::vector<Range> todo{{0, n_cuts, 1}};
  while (!todo.empty()) {
    Range r = todo.back();
    todo.pop_back();
    if (r.hi <= r.lo || r.level > depth) continue;
    int prev = r.lo;
    for (int j = 1; j <= k; ++j) {
      const int c = r.lo + static_cast<int>((static_cast<int64_t>(r.hi - r.lo) * j) / (k + 1));
      if (c < prev || c >= r.hi) continue;
      for (int u : cuts[c].keep) m[u] = std::min(m[u], r.level - 1);
      todo.push_back({prev, c, r.level + 1});
      prev = c + 1;
    }
    todo.push_back({prev, r.hi, r.level + 1});
  }
  return m;
}

namespace {
// optimal: how many of the least-objective solutions are scored by exact plans, and how far above
// the least objective the search keeps collecting them.
constexpr size_t kOptimalCandidates = 3;
constexpr double kOptimalSlack = 0.5;
// budget: the papers' solutions in the family (twice this many at most) and how far above the
// least objective the max-term loop collects them.
constexpr size_t kBudgetPaper = 8;
constexpr double kBudgetSlack = 4.0;
constexpr int kKeepBackPoints = 7;  // budget: points along each keep-back path
// budget's fast solver: the time limit of its LP bound (CBC's limit is a quarter of it; Clp may not
// stop at it; a bound is taken only from an LP solved to optimality, else the knapsack bound)
constexpr double kBudgetLpSeconds = 60.0;
// ... and the gaps it models: its bound is set by the end of the forward pass and the fullest
// backward gap (on ResNet-56 the same with 2 gaps as with 16, at 1/10 of the time; with 16 on the
// 1001-layer ResNet the LP took 13 s).
constexpr int kBudgetLpGaps = 2;
}  // namespace

namespace {

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

}  // namespace

double budget_lower_bound(const Graph& fwd, const TrainingGraph& tg, int64_t arena_limit) {
  // Forward values the backward pass reads: per forward compute node, the bytes of its outputs
  // read by backward nodes (a recomputed copy stands for its forward node, a view for the node
  // whose memory it aliases). Whatever the mirror plan, a kept one of these is live when the
  // forward pass ends (the schedule runs all of forward first), and a dropped one is recomputed
  // at least once.
  const Graph& g = tg.graph;
  std::vector<std::vector<char>> read(fwd.size());
  for (size_t v = 0; v < fwd.size(); ++v) read[v].assign(fwd.node(static_cast<int>(v)).outputs.size(), 0);
  for (size_t id = static_cast<size_t>(tg.num_forward); id < g.size(); ++id) {
    const Node& n = g.node(static_cast<int>(id));
    if (n.role != NodeRole::backward) continue;
    for (const EntryRef& e : n.inputs) {
      const Node& src = g.node(e.node);
      // (nodes the optimiser update added after the gradient pass are not forward nodes)
      int u = src.role == NodeRole::recompute ? src.source : (e.node < tg.num_forward ? e.node : -1);
      if (u >= static_cast<int>(fwd.size())) u = -1;
      int index = e.index;
      while (u >= 0 && fwd.node(u).is(OpKind::view)) {  // the memory it aliases: that input's entry
        const EntryRef in = fwd.node(u).inputs[0];
        u = in.node, index = in.index;
      }
      if (u >= 0 && fwd.node(u).is(OpKind::compute)) read[u][index] = 1;
    }
  }
  struct Item {
    double flops, bytes;
  };
  std::vector<Item> items;
  double saved = 0;
  for (size_t v = 0; v < fwd.size(); ++v) {
    const Node& n = fwd.node(static_cast<int>(v));
    double bytes = 0;
    for (size_t j = 0; j < n.outputs.size(); ++j)
      if (read[v][j]) bytes += static_cast<double>(n.outputs[j].bytes());
    if (bytes == 0) continue;
    items.push_back({node_cost(fwd, static_cast<int>(v)).flops, bytes});
    saved += bytes;
  }
  // Dropped ones must cover what does not fit: the least recompute doing so, with fractions
  // allowed (the LP relaxation of that covering knapsack: cheapest FLOPs per byte first).
  double need = saved - static_cast<double>(arena_limit);
  if (need <= 0) return 0;
  std::sort(items.begin(), items.end(), [](const Item& a, const Item& b) { return a.flops * b.bytes < b.flops * a.bytes; });
  double bound = 0;
  for (const Item& it : items) {
    if (need <= 0) break;
    const double take = std::min(1.0, need / it.bytes);
    bound += take * it.flops;
    need -= take * it.bytes;
  }
  return bound;
}

std::vector<double> sublinear_budgets(const Graph& fwd, const std::vector<Cut>& cuts) {
  double x = 0, y = 0;
  budget_plan(fwd, cuts, 0.0, &x, &y, nullptr);
  const double b = std::sqrt(x * y);
  std::vector<double> budgets{0.0, b};
  for (int i = 0; i < 6; ++i) budgets.push_back(b / std::sqrt(2.0) * std::pow(2.0, i / 5.0));  // 6 points, B/sqrt2 .. sqrt2 B
  return budgets;
}

MirrorResult plan_mirror(const Graph& fwd, EntryRef loss, const MemoryMode& mode, const std::map<int, int>& overrides,
                         const SgdSpec* sgd, const Device* device) {
  const auto t0 = std::chrono::steady_clock::now();
  auto apply = [&](MirrorPlan m) {
    if (m.empty()) m.assign(fwd.size(), 0);
    for (const auto& [node, k] : overrides) m.at(node) = k;
    return m;
  };
  auto evaluate = [&](const MirrorPlan& m, int64_t prune_above = -1) {
    MirrorResult r;
    r.mirror = m;
    r.training = build_training_graph(fwd, loss, m);
    if (sgd) add_sgd_updates(r.training, *sgd);
    r.planned = plan_training_step(r.training, mode.alloc, device, prune_above);
    return r;
  };
  // Scores `plans` by their exact plans, in parallel (they are independent), each distinct plan
  // once: plan i's result is rs[same[i]], same[i] the first plan equal to it. The plans in `lead`
  // are scored first, in full; the others then stop after their liveness when their live bytes
  // (a lower bound of their arena) exceed the leads' best arena (plan_memory's prune_above):
  // those cannot win, and the packing they skip is most of their cost. The threshold is fixed
  // before the second round, so the same plans are pruned on every run and thread count.
  // `prune_above` >= 0: the threshold for the others instead (budget: no plan whose live bytes
  // exceed the arena limit can fit).
  auto score = [&](const std::vector<MirrorPlan>& plans, const std::vector<size_t>& lead, std::vector<size_t>& same,
                   int64_t prune_above = -1) {
    same.resize(plans.size());
    for (size_t i = 0; i < plans.size(); ++i) {
      same[i] = i;
      for (size_t k = 0; k < i && same[i] == i; ++k)
        if (same[k] == k && plans[k] == plans[i]) same[i] = k;
    }
    std::vector<MirrorResult> rs(plans.size());
    auto run = [&](const std::vector<size_t>& which, int64_t prune_above) {
      // An exception must not leave an OpenMP region (std::terminate): keep the first, rethrow after.
      std::vector<std::exception_ptr> errors(which.size());
#pragma omp parallel for schedule(dynamic)
      for (size_t k = 0; k < which.size(); ++k) {
        try {
          rs[which[k]] = evaluate(plans[which[k]], prune_above);
        } catch (...) {
          errors[k] = std::current_exception();
        }
      }
      for (const std::exception_ptr& e : errors)
        if (e) std::rethrow_exception(e);
    };
    std::vector<size_t> first, rest;
    for (size_t i = 0; i < plans.size(); ++i) {
      if (same[i] != i) continue;
      const bool is_lead = std::any_of(lead.begin(), lead.end(), [&](size_t l) { return same[l] == i; });
      (is_lead ? first : rest).push_back(i);
    }
    run(first, -1);
    int64_t bound = first.empty() ? -1 : INT64_MAX;
    for (size_t i : first) bound = std::min(bound, rs[i].planned.report.arena_bytes);
    run(rest, prune_above >= 0 ? prune_above : bound);
    return rs;
  };
  // The least arena among the scored plans; ties go to the earlier plan.
  auto least = [](const std::vector<MirrorResult>& rs, const std::vector<size_t>& same) {
    size_t chosen = 0;
    for (size_t i = 1; i < same.size(); ++i) {
      const MemoryReport &r = rs[same[i]].planned.report, &c = rs[same[chosen]].planned.report;
      if (!r.pruned && (c.pruned || r.arena_bytes < c.arena_bytes)) chosen = i;
    }
    return chosen;
  };
  MirrorResult best;
  switch (mode.mirror) {
    case MirrorStrategy::none: best = evaluate(apply({})); break;
    case MirrorStrategy::drop_bn_relu: best = evaluate(apply(drop_bn_relu_plan(fwd))); break;
    case MirrorStrategy::recursive: {
      // Deeper nesting than bisection of the cuts needs (log2 of their count) recomputes more and
      // saves nothing: the depth is capped by the graph's, which also bounds the planner's work.
      const std::vector<Cut> cuts = find_cuts(fwd);
      const int levels = std::max(1, static_cast<int>(std::ceil(std::log2(static_cast<double>(cuts.size()) + 1.0))));
      const int depth = mode.depth > 0 ? std::min(mode.depth, levels) : 0;
      best = evaluate(apply(recursive_plan(fwd, cuts, depth)));
      break;
    }
    case MirrorStrategy::optimal: {
      const auto s0 = std::chrono::steady_clock::now();
      const CheckpointGraph cg = checkpoint_graph(fwd, loss.node);
      const DivisionTree tree = division_tree(cg);
      const OptimalSearch search = optimal_checkpoints(cg, tree, kOptimalSlack);
      // Candidates, each a 0/1 mirror plan scored by its exact plan:
      //   paper      the least objectives (ties: the larger max term, found first);
      //   refined    each of those after refine_checkpoints (segments with several entries);
      //   keep-all   max term 0, `share`'s plan (the objective ranks it last, but where the
      //              backward pass needs little of the forward the exact plan can prefer it);
      //   sublinear  Chen's cut plans of `sublinear` (its budget search): the papers' segments
      //              have one entry, so a step boundary of a 2-layer LSTM (h and c of each layer)
      //              is no checkpoint set of theirs, and Chen's cuts win there.
      std::vector<size_t> order = by_objective(search);
      if (order.size() > kOptimalCandidates) order.resize(kOptimalCandidates);
      std::vector<CheckpointSolution> sols;
      std::vector<std::string> origin;
      for (size_t i : order) sols.push_back(solve_max_term(cg, tree, search.solutions[i].max_term)), origin.push_back("paper");
      for (size_t i = 0, n = sols.size(); i < n; ++i) {
        CheckpointSolution r = refine_checkpoints(cg, sols[i]);
        bool seen = false;
        for (const CheckpointSolution& c : sols) seen |= c.checkpoints == r.checkpoints;
        if (!seen) sols.push_back(std::move(r)), origin.push_back("refined");
      }
      // Keeping everything is always a candidate (the scoring drops it when another candidate is
      // the same plan): `optimal` is then never worse than `share`.
      sols.push_back(solve_max_term(cg, tree, 0)), origin.push_back("keep-all");
      std::vector<MirrorPlan> plans;
      std::vector<SearchStep> log;
      for (size_t i = 0; i < sols.size(); ++i) {
        plans.push_back(apply(origin[i] == "keep-all" ? MirrorPlan{} : checkpoint_mirror_plan(cg, sols[i].checkpoints, fwd.size())));
        SearchStep st;
        st.budget = static_cast<double>(sols[i].max_term);
        st.kept_cuts = static_cast<int>(sols[i].checkpoints.size());
        st.objective_bytes = sols[i].objective();
        st.origin = origin[i];
        log.push_back(st);
      }
      const double search_seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - s0).count();
      const std::vector<Cut> cuts = find_cuts(fwd);
      for (double budget : sublinear_budgets(fwd, cuts)) {
        SearchStep st;
        st.budget = budget;
        plans.push_back(apply(budget_plan(fwd, cuts, budget, nullptr, nullptr, &st.kept_cuts)));
        st.origin = "sublinear";
        log.push_back(st);
      }
      // Leads: the least objective (paper or refined) and sublinear's sqrt(x y) budget.
      size_t top = 0;
      for (size_t i = 1; i < sols.size(); ++i)
        if (origin[i] != "keep-all" && sols[i].objective() < sols[top].objective()) top = i;
      std::vector<size_t> lead{top};
      if (plans.size() > sols.size() + 1) lead.push_back(sols.size() + 1);
      std::vector<size_t> at;
      std::vector<MirrorResult> rs = score(plans, lead, at);
      const size_t chosen = least(rs, at);
      int pruned = 0;
      for (size_t i = 0; i < at.size(); ++i) {
        const MemoryReport& rep = rs[at[i]].planned.report;
        log[i].feature_map_bytes = rep.feature_map_bytes, log[i].workspace_bytes = rep.workspace_bytes;
        log[i].arena_bytes = rep.arena_bytes, log[i].recompute_flops = rep.recompute_flops, log[i].chosen = i == chosen;
        log[i].pruned = rep.pruned, log[i].max_live_bytes = rep.max_live_bytes;
        pruned += rep.pruned;
      }
      best = std::move(rs[at[chosen]]);
      best.pruned = pruned;
      best.search = std::move(log);
      best.model_optimum = search.solutions.empty() ? -1 : search.solutions[search.best].objective();
      best.model_objective = chosen < sols.size() ? sols[chosen].objective() : -1;
      best.max_terms = search.max_terms;
      best.tree_segments = static_cast<int>(tree.segments.size());
      best.search_seconds = search_seconds;
      break;
    }
    case MirrorStrategy::budget: {
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
      // recompute FLOPs and live bytes (a lower bound of its arena). Only the members the choice
      // needs are then packed: the choice is the same as packing every member, so it is still a
      // function of the fixed family (monotone), at a fraction of the cost.
      auto light = [&](const std::vector<MirrorPlan>& ps) {
        std::vector<MemoryReport> out(ps.size());
        std::vector<size_t> first(ps.size());
        std::vector<size_t> todo;
        for (size_t i = 0; i < ps.size(); ++i) {
          first[i] = static_cast<size_t>(std::find(ps.begin(), ps.begin() + static_cast<std::ptrdiff_t>(i), ps[i]) - ps.begin());
          if (first[i] == i) todo.push_back(i);
        }
        std::vector<std::exception_ptr> errors(todo.size());
#pragma omp parallel for schedule(dynamic)
        for (size_t k = 0; k < todo.size(); ++k) {
          try {
            out[todo[k]] = evaluate(ps[todo[k]], 0).planned.report;
          } catch (...) {
            errors[k] = std::current_exception();
          }
        }
        for (const std::exception_ptr& e : errors)
          if (e) std::rethrow_exception(e);
        for (size_t i = 0; i < ps.size(); ++i) out[i] = out[first[i]];
        return out;
      };
      // Packed members (member -> its full result), planned in parallel batches.
      std::map<size_t, MirrorResult> packed;
      auto pack = [&](const std::vector<size_t>& which) {
        std::vector<MirrorResult> rs(which.size());
        std::vector<std::exception_ptr> errors(which.size());
#pragma omp parallel for schedule(dynamic)
        for (size_t k = 0; k < which.size(); ++k) {
          try {
            rs[k] = evaluate(plans[which[k]]);
          } catch (...) {
            errors[k] = std::current_exception();
          }
        }
        for (const std::exception_ptr& e : errors)
          if (e) std::rethrow_exception(e);
        for (size_t k = 0; k < which.size(); ++k) packed.emplace(which[k], std::move(rs[k]));
      };
      pack({0});  // keep-all: the limit (budget=0.5x) and what the step needs beside its arena
      const MemoryReport keep_all = packed.at(0).planned.report;
      const int64_t limit = mode.budget_bytes > 0 ? mode.budget_bytes
                                                  : static_cast<int64_t>(mode.budget_ratio * static_cast<double>(keep_all.total_bytes));
      const int64_t beside = keep_all.total_bytes - keep_all.arena_bytes;  // the same for every member
      const int64_t arena_limit = limit - beside;
      std::vector<MemoryReport> reps = light(plans);
      // Keep-back paths: from each of Chen's and the recursive plans that no other of them beats in
      // both live bytes and recompute, the dropped nodes kept back, the most recompute FLOPs per
      // byte first; points along each path at fractions 2^(-k/2) of the dropped nodes, k = 1..7
      // (8.8% .. 70.7%). They depend on the graph only, so the family is still fixed.
      {
        const size_t base_members = plans.size();
        auto chen = [&](size_t i) { return log[i].origin == "sublinear" || log[i].origin == "recursive"; };
        std::vector<size_t> bases;
        for (size_t i = 0; i < base_members; ++i) {
          if (!chen(i) || std::find(plans.begin(), plans.begin() + static_cast<std::ptrdiff_t>(i), plans[i]) != plans.begin() + static_cast<std::ptrdiff_t>(i))
            continue;
          bool beaten = false;
          for (size_t j = 0; j < base_members && !beaten; ++j) {
            if (j == i || !chen(j) || plans[j] == plans[i]) continue;
            const MemoryReport &a = reps[i], &b = reps[j];
            beaten = b.max_live_bytes <= a.max_live_bytes && b.recompute_flops <= a.recompute_flops &&
                     (b.max_live_bytes < a.max_live_bytes || b.recompute_flops < a.recompute_flops || j < i);
          }
          if (!beaten) bases.push_back(i);
        }
        std::vector<MirrorPlan> paths;
        for (size_t p : bases) {
          const MirrorPlan& base = plans[p];
          std::vector<std::pair<double, int>> dropped;
          for (size_t v = 0; v < fwd.size(); ++v) {
            const Node& node = fwd.node(static_cast<int>(v));
            if (!base[v] || !node.is(OpKind::compute)) continue;
            double bytes = 0;
            for (const TensorType& t : node.outputs) bytes += static_cast<double>(t.bytes());
            dropped.push_back({-node_cost(fwd, static_cast<int>(v)).flops / std::max(1.0, bytes), static_cast<int>(v)});
          }
          std::sort(dropped.begin(), dropped.end());
          for (int k = kKeepBackPoints; k >= 1; --k) {
            const size_t j = static_cast<size_t>(std::ceil(static_cast<double>(dropped.size()) * std::pow(2.0, -k / 2.0)));
            if (j == 0 || j >= dropped.size()) continue;
            MirrorPlan m = base;
            for (size_t i = 0; i < j; ++i) m[dropped[i].second] = 0;
            paths.push_back(apply(views_follow(fwd, std::move(m))));
            SearchStep st;
            st.origin = "keep-back", st.budget = static_cast<double>(j), st.kept_cuts = log[p].kept_cuts;
            log.push_back(st);
          }
        }
        const std::vector<MemoryReport> more = light(paths);
        for (size_t k = 0; k < paths.size(); ++k) plans.push_back(std::move(paths[k])), reps.push_back(more[k]);
      }
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
      // The least recompute FLOPs that fits; ties: the smaller total, then the earlier member.
      // Members whose live bytes exceed the arena limit cannot fit; the others are packed by
      // recompute until one fits (and those with its recompute, for the tie).
      std::vector<size_t> by_flops;
      for (size_t i = 0; i < plans.size(); ++i)
        if (reps[i].max_live_bytes <= arena_limit) by_flops.push_back(i);
      std::stable_sort(by_flops.begin(), by_flops.end(), [&](size_t a, size_t b) { return reps[a].recompute_flops < reps[b].recompute_flops; });
      std::optional<size_t> chosen;
      auto better = [&](size_t i) {
        const MemoryReport& r = packed.at(i).planned.report;
        if (r.total_bytes > limit) return false;
        if (!chosen) return true;
        const MemoryReport& c = packed.at(*chosen).planned.report;
        return r.recompute_flops < c.recompute_flops || (r.recompute_flops == c.recompute_flops && r.total_bytes < c.total_bytes) ||
               (r.recompute_flops == c.recompute_flops && r.total_bytes == c.total_bytes && i < *chosen);
      };
      pack_in_order(by_flops, [&](size_t i) {
        for (const auto& [j, r] : packed)
          if (reps[j].max_live_bytes <= arena_limit && better(j)) chosen = j;
        return !chosen || reps[i].recompute_flops <= packed.at(*chosen).planned.report.recompute_flops;
      });
      for (const auto& [j, r] : packed)
        if (reps[j].max_live_bytes <= arena_limit && better(j)) chosen = j;
      MNEMO_ASSERT(chosen) << "budget: the least total fits, so some member does";
      for (size_t i = 0; i < plans.size(); ++i) {
        SearchStep& st = log[i];
        st.max_live_bytes = reps[i].max_live_bytes, st.recompute_flops = reps[i].recompute_flops;
        const auto it = packed.find(i);
        st.pruned = it == packed.end();
        st.too_big = reps[i].max_live_bytes > arena_limit;  // (known without packing)
        if (st.pruned) continue;
        const MemoryReport& rep = it->second.planned.report;
        st.feature_map_bytes = rep.feature_map_bytes, st.workspace_bytes = rep.workspace_bytes, st.arena_bytes = rep.arena_bytes;
        st.total_bytes = rep.total_bytes, st.fits = rep.total_bytes <= limit;
      }
      const MirrorResult& keep_result = packed.at(0);
      double bound = budget_lower_bound(fwd, keep_result.training, arena_limit);
      auto zero_one = [](const MirrorPlan& m) { return std::all_of(m.begin(), m.end(), [](int k) { return k <= 1; }); };
      const bool chosen_01 = zero_one(plans[*chosen]);
      // The programme of memory/budget_exact.h: solved (exact) or its LP relaxation (fast), both
      // a proven bound. Per-node overrides fall outside its plans: then only the knapsack bound.
      std::optional<MirrorResult> found;
      ExactBudget eb;
      if (overrides.empty()) {
        const bool exact = mode.budget_solver == MemoryMode::Solver::exact;
        ExactBudgetOptions eo;
        eo.arena_limit = arena_limit;
        eo.device = device;
        // (The programme's plans are 0/1; a recursive member recomputes some nodes more than
        // once, so it is not an incumbent of the programme: the programme then seeks any plan.)
        eo.incumbent_flops = chosen_01 ? packed.at(*chosen).planned.report.recompute_flops : -1;
        eo.integer = exact;
        eo.seconds = exact ? mode.budget_seconds : kBudgetLpSeconds;
        if (!exact) eo.max_gaps = kBudgetLpGaps;
        if (exact)
          eo.progress = [next = 1.0](int solves, double seconds, double best_flops, double bound_flops) mutable {
            if (seconds < next) return;  // from 1 s on, at most one line a second
            next = seconds + 1;
            std::fprintf(stderr, "mnemo: budget exact: %d solves, %.1f s: least recompute that fits %.4g GFLOP, bound %.4g GFLOP\n",
                         solves, seconds, best_flops / 1e9, bound_flops / 1e9);
          };
        auto check = [&](const MirrorPlan& m) {
          MirrorResult r = evaluate(apply(m));
          BudgetCheck c;
          c.fits = r.planned.report.total_bytes <= limit;
          c.excess_bytes = std::max<int64_t>(0, r.planned.report.total_bytes - limit);
          c.recompute_flops = r.planned.report.recompute_flops;
          c.peak_gap = budget_peak_gap(r.training, analyze_liveness(r.training.graph, mode.alloc != AllocMode::none, r.planned.plan.kernels));
          for (size_t id = r.training.num_forward; id < r.training.graph.size(); ++id)
            if (const Node& n = r.training.graph.node(static_cast<int>(id)); n.role == NodeRole::recompute) c.recomputed.push_back(n.source);
          if (c.fits && (!found || c.recompute_flops < found->planned.report.recompute_flops)) found = std::move(r);
          return c;
        };
        eb = solve_budget_exact(fwd, keep_result.training, eo, check);
      }
      if (found && found->planned.report.recompute_flops < packed.at(*chosen).planned.report.recompute_flops) {
        const MemoryReport& rep = found->planned.report;
        SearchStep st;
        st.origin = "exact", st.feature_map_bytes = rep.feature_map_bytes, st.workspace_bytes = rep.workspace_bytes;
        st.arena_bytes = rep.arena_bytes, st.recompute_flops = rep.recompute_flops, st.total_bytes = rep.total_bytes;
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
      best.bound_over_01 = zero_one(best.mirror) && std::isfinite(eb.bound_flops) && eb.bound_flops > bound;
      if (best.bound_over_01) bound = eb.bound_flops;
      best.lower_bound_flops = std::min(bound, best.planned.report.recompute_flops);
      best.budget_bytes = limit;
      best.least_feasible = least;
      best.solver_status = !overrides.empty() ? "no programme (per-node mirror overrides): knapsack bound"
                           : mode.budget_solver == MemoryMode::Solver::fast ? "fast (the family), bound: programme " + eb.status
                                                                            : "exact programme: " + eb.status;
      best.solver_solves = eb.solves, best.solver_cuts = eb.cuts, best.solver_gaps = eb.gaps, best.solver_seconds = eb.seconds;
      break;
    }
    case MirrorStrategy::sublinear: {
      // Scores the plans of every budget and keeps the least arena (ties: the earlier budget).
      const std::vector<Cut> cuts = find_cuts(fwd);
      const std::vector<double> budgets = sublinear_budgets(fwd, cuts);
      std::vector<MirrorPlan> plans;
      std::vector<int> kept(budgets.size());
      for (size_t i = 0; i < budgets.size(); ++i) plans.push_back(apply(budget_plan(fwd, cuts, budgets[i], nullptr, nullptr, &kept[i])));
      std::vector<size_t> at;
      std::vector<MirrorResult> rs = score(plans, {}, at);
      const size_t chosen = least(rs, at);
      std::vector<SearchStep> log;
      for (size_t i = 0; i < at.size(); ++i) {
        const MemoryReport& rep = rs[at[i]].planned.report;
        SearchStep st;
        st.budget = budgets[i], st.kept_cuts = kept[i], st.feature_map_bytes = rep.feature_map_bytes;
        st.workspace_bytes = rep.workspace_bytes, st.arena_bytes = rep.arena_bytes, st.recompute_flops = rep.recompute_flops;
        st.chosen = i == chosen;
        log.push_back(st);
      }
      best = std::move(rs[at[chosen]]);
      best.search = std::move(log);
      break;
    }
  }
  best.planning_seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  best.planned.report.mode = mode.name;
  best.planned.report.planning_seconds = best.planning_seconds;
  return best;
}

}  // namespace mnemo
