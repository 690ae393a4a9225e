// Mirror planners (see mirror_planner.h).
#include "memory/mirror_planner.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <exception>
#include <functional>
#include <map>
#include <optional>

#include "memory/budget_fill.h"
#include "memory/mirror_search.h"
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
  // The error names the part that is wrong, then the syntax.
  auto fail = [&](const std::string& why) {
    MNEMO_FAIL() << "memory mode '" << name << "': " << why
                 << "; expected budget=SIZE with SIZE a positive size like 2GiB, 900MB or 123456789 (bytes), or a factor of "
                    "share's total like 0.5x, optionally followed by :fast, :fast=SECONDS, :search, :search=SECONDS, :exact or :exact=SECONDS, by :bound=SECONDS "
                    "(with :fast or :search) and by :balance=B (FLOPs per byte, >= 0)";
  };
  // A decimal number at the start of `t` (its length in *pos): digits, a point, an exponent (no
  // hexadecimal, inf or nan, which std::stod also reads).
  auto number = [&](const std::string& t, size_t* pos, const std::string& what) {
    const size_t digits = t.find_first_not_of("0123456789.eE+-");
    if (t.empty() || t.find_first_of("0123456789") >= std::min(digits, t.size())) fail(what + " is not a number");
    double v = 0;
    try {
      v = std::stod(t.substr(0, digits), pos);
    } catch (...) {
      fail(what + " is not a number");
    }
    return v;
  };
  auto seconds = [&](const std::string& option, const std::string& t) {
    size_t pos = 0;
    const double v = number(t, &pos, "':" + option + "'");
    if (pos != t.size() || !std::isfinite(v) || v < 0 || v > kMaxTimeLimitSeconds)
      fail("':" + option + "': SECONDS must be a number in [0, " + std::to_string(static_cast<int64_t>(kMaxTimeLimitSeconds)) + "]");
    return v;
  };
  bool solver_given = false, balance_given = false, bound_given = false, fast_seconds = false;
  for (size_t colon; (colon = text.rfind(':')) != std::string::npos;) {
    const std::string option = text.substr(colon + 1);
    text.resize(colon);
    if (option.rfind("balance=", 0) == 0) {
      if (balance_given) fail("':balance' given twice");
      balance_given = true;
      size_t pos = 0;
      m.balance = number(option.substr(8), &pos, "':" + option + "'");
      if (pos != option.size() - 8 || !std::isfinite(m.balance) || m.balance < 0 || m.balance > 1e6)
        fail("':" + option + "': B must be a number in [0, 1e6]");
      continue;
    }
    if (option.rfind("bound=", 0) == 0) {
      if (bound_given) fail("':bound' given twice");
      bound_given = true;
      m.budget_bound_seconds = seconds(option, option.substr(6));
      continue;
    }
    if (solver_given) fail("':" + option + "': a second solver option (one of :fast, :search or :exact)");
    solver_given = true;
    if (option == "fast") {
      m.budget_solver = MemoryMode::Solver::fast;
    } else if (option == "search") {
      m.budget_solver = MemoryMode::Solver::search;
    } else if (option == "exact") {
      m.budget_solver = MemoryMode::Solver::exact;
    } else if (option.rfind("search=", 0) == 0) {
      m.budget_solver = MemoryMode::Solver::search;
      m.budget_seconds = seconds(option, option.substr(7));
      if (m.budget_seconds <= 0) fail("':" + option + "': the local search needs SECONDS > 0");
    } else if (option.rfind("fast=", 0) == 0) {
      m.budget_solver = MemoryMode::Solver::fast;
      m.budget_bound_seconds = seconds(option, option.substr(5));
      fast_seconds = true;
    } else if (option.rfind("exact=", 0) == 0) {
      m.budget_solver = MemoryMode::Solver::exact;
      m.budget_seconds = seconds(option, option.substr(6));
      if (m.budget_seconds <= 0) fail("':" + option + "': the exact solver needs SECONDS > 0");
    } else {
      fail("unknown option ':" + option + "'");
    }
  }
  // (Options are read from the right: `m.budget_bound_seconds` holds whichever came first.)
  if (bound_given && fast_seconds) fail("':bound=SECONDS' and ':fast=SECONDS' both set the bound's time: give one");
  if (bound_given && m.budget_solver == MemoryMode::Solver::exact)
    fail("':bound=SECONDS' with :exact: the exact solver's bound has its own time (:exact=SECONDS)");
  size_t pos = 0;
  const double value = number(text, &pos, "SIZE '" + text + "'");
  std::string unit = text.substr(pos);
  unit.erase(0, unit.find_first_not_of(' '));
  if (!std::isfinite(value) || value <= 0) fail("SIZE '" + text + "' is not positive");
  if (unit == "x") {
    if (value > 1e6) fail("the factor " + text + " is above 1e6");
    m.budget_ratio = value;
    return;
  }
  static const std::map<std::string, double> units = {
      {"", 1}, {"B", 1}, {"KB", 1e3}, {"MB", 1e6}, {"GB", 1e9}, {"TB", 1e12}, {"PB", 1e15},
      {"KiB", 1024.0}, {"MiB", 1048576.0}, {"GiB", 1073741824.0}, {"TiB", 1099511627776.0}, {"PiB", 1125899906842624.0}};
  const auto u = units.find(unit);
  if (u == units.end()) fail("unknown unit '" + unit + "' (B, KB, MB, GB, TB, PB, KiB, MiB, GiB, TiB, PiB or x)");
  // A count of bytes is whole (1.5 was taken as 1 byte); a size in larger units rounds down.
  if (u->second == 1 && value != std::floor(value)) fail("SIZE '" + text + "' is not a whole number of bytes");
  const double bytes = value * u->second;
  if (bytes < 1 || bytes > 9.0e18) fail("SIZE '" + text + "' is outside [1 byte, 9e18 bytes]");
  m.budget_bytes = static_cast<int64_t>(bytes);
}

}  // namespace

const char* const kMemoryModeNames =
    "none, inplace, share, drop-bn-relu, sublinear, sublinear:chen, recursive, recursive=DEPTH, optimal or budget=SIZE";

MemoryMode parse_memory_mode(const std::string& name) {
  MemoryMode m;
  m.name = name;
  if (name == "none" || name == "inplace" || name == "share") {
    m.alloc = parse_alloc_mode(name);
    return m;
  }
  if (name == "drop-bn-relu") m.mirror = MirrorStrategy::drop_bn_relu;
  else if (name == "sublinear") m.mirror = MirrorStrategy::sublinear;
  else if (name == "sublinear:chen") m.mirror = MirrorStrategy::sublinear, m.sublinear_fill = false;
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
    MNEMO_FAIL() << "unknown memory mode '" << name << "' (expected " << kMemoryModeNames << ")";
  }
  return m;
}

std::vector<std::string> all_memory_modes() { return {"none", "inplace", "share", "drop-bn-relu", "sublinear", "sublinear:chen", "recursive", "optimal"}; }

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
}  // namespace


std::vector<double> sublinear_budgets(const Graph& fwd, const std::vector<Cut>& cuts) {
  double x = 0, y = 0;
  budget_plan(fwd, cuts, 0.0, &x, &y, nullptr);
  const double b = std::sqrt(x * y);
  std::vector<double> budgets{0.0, b};
  for (int i = 0; i < 6; ++i) budgets.push_back(b / std::sqrt(2.0) * std::pow(2.0, i / 5.0));  // 6 points, B/sqrt2 .. sqrt2 B
  return budgets;
}

std::vector<size_t> first_equal(const std::vector<MirrorPlan>& plans) {
  std::vector<size_t> same(plans.size());
  for (size_t i = 0; i < plans.size(); ++i) {
    same[i] = i;
    for (size_t k = 0; k < i && same[i] == i; ++k)
      if (same[k] == k && plans[k] == plans[i]) same[i] = k;
  }
  return same;
}

MirrorPlan PlanContext::apply(MirrorPlan m) const {
  if (m.empty()) m.assign(fwd.size(), 0);
  for (const auto& [node, k] : overrides) m.at(node) = k;
  return m;
}

MirrorResult PlanContext::evaluate(const MirrorPlan& m, int64_t prune_above, int64_t enough) const {
  return evaluate_in(m, mode.order == ScheduleOrder::optimal ? ScheduleOrder::greedy : mode.order, prune_above, enough);
}

MirrorResult PlanContext::evaluate_in(const MirrorPlan& m, ScheduleOrder order, int64_t prune_above, int64_t enough) const {
  MirrorResult r;
  r.mirror = m;
  // A light result (prune_above 0: liveness only, never chosen or packed as it is) is built
  // without the name index: nothing reads its names (docs/MEMORY.md "Cost"). So is a probe
  // (`enough` set: packed only until a packing fits, planned again in full if it is taken).
  const bool light = prune_above == 0 || enough >= 0;
  r.training = build_training_graph(fwd, loss, m, !light);
  if (sgd) add_sgd_updates(r.training, *sgd);
  std::vector<PreparedKernel> kernels;
  if (order != ScheduleOrder::default_order) {
    kernels = prepare_kernels(r.training.graph, device);
    r.order = reorder_step(r.training, kernels, order, mode.alloc != AllocMode::none, mode.order_seconds);
  }
  // (Light results and probes keep their liveness: the fills and the search's repairs analyse
  // them further, docs/MEMORY.md "Cost".)
  r.planned = plan_training_step(r.training, mode.alloc,
                                 {.device = device, .prune_above = prune_above, .kernels = std::move(kernels), .enough = enough,
                                  .balance = mode.balance, .keep_liveness = light});
  return r;
}

void PlanContext::finish_order(MirrorResult& best) const {
  if (mode.order != ScheduleOrder::optimal) return;
  MirrorResult r = evaluate_in(best.mirror, ScheduleOrder::optimal);
  if (r.planned.report.total_bytes > best.planned.report.total_bytes) {
    best.order.status += "; the programme's order packed larger: greedy's kept";
    return;
  }
  best.training = std::move(r.training);
  best.planned = std::move(r.planned);
  best.order = std::move(r.order);
}

void PlanContext::place(MirrorResult& r, double seconds) const {
  const MemoryReport& rep = r.planned.report;
  if (mode.alloc != AllocMode::share || seconds <= 0 || rep.arena_bytes <= rep.max_live_bytes) return;
  PlannedStep p = plan_training_step(r.training, mode.alloc,
                                     {.device = device, .kernels = r.planned.plan.kernels, .exact_seconds = seconds, .balance = mode.balance});
  if (rep.placement == "best fit" || p.report.arena_bytes < rep.arena_bytes) r.planned = std::move(p);
}

namespace {
// The exact placement of a sublinear fill: at most this long (plan_mirror).
constexpr double kFillPlacementSeconds = 1.0;
// sublinear's fills (Chen et al. Sec. 4.3: "keep time consuming operations when possible"): Chen's
// plan with its dropped nodes kept back, the most recompute cost per byte first, in both keep-back
// orders of budget's fills (memory/budget_fill.h), while the live bytes stay within the plan's own
// peak; each distinct fill scored by its exact plan (best fit).
std::vector<MirrorResult> fill_at_own_peak(const PlanContext& ctx, const MirrorPlan& chen) {
  const FillStart start = prepare_fill(ctx, chen);
  std::vector<std::vector<int>> keeps;
  for (int order = 0; order < 2; ++order) {
    std::vector<int> k = fill_keeps(start, order, start.live_bytes);
    if (!k.empty() && std::find(keeps.begin(), keeps.end(), k) == keeps.end()) keeps.push_back(std::move(k));
  }
  std::vector<std::optional<MirrorResult>> rs(keeps.size());
  parallel_each(keeps.size(), [&](size_t k) {
    if (std::optional<Fill> f = fill_to(ctx, start, std::move(keeps[k]), start.live_bytes); f && f->plan != chen)
      rs[k] = ctx.evaluate(f->plan);
  });
  std::vector<MirrorResult> out;
  for (std::optional<MirrorResult>& r : rs)
    if (r) out.push_back(std::move(*r));
  return out;
}
}  // namespace

MirrorResult plan_mirror(const Graph& fwd, EntryRef loss, const MemoryMode& mode, const std::map<int, int>& overrides,
                         const SgdSpec* sgd, const Device* device) {
  const auto t0 = std::chrono::steady_clock::now();
  const PlanContext ctx{fwd, loss, mode, overrides, sgd, device};
  auto apply = [&](MirrorPlan m) { return ctx.apply(std::move(m)); };
  auto evaluate = [&](const MirrorPlan& m, int64_t prune_above = -1) { return ctx.evaluate(m, prune_above); };
  // Scores `plans` by their exact plans, in parallel (they are independent), each distinct plan
  // once: plan i's result is rs[same[i]], same[i] the first plan equal to it. The plans in `lead`
  // are scored first, in full; the others then stop after their liveness when their live bytes
  // (a lower bound of their arena) exceed the leads' best arena (plan_memory's prune_above):
  // those cannot win, and the packing they skip is most of their cost. The threshold is fixed
  // before the second round, so the same plans are pruned on every run and thread count.
  auto score = [&](const std::vector<MirrorPlan>& plans, const std::vector<size_t>& lead, std::vector<size_t>& same) {
    same = first_equal(plans);
    std::vector<MirrorResult> rs(plans.size());
    auto run = [&](const std::vector<size_t>& which, int64_t prune_above) {
      parallel_each(which.size(), [&](size_t k) { rs[which[k]] = evaluate(plans[which[k]], prune_above); });
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
    run(rest, bound);
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
  std::vector<MirrorResult> fills;  // sublinear: Chen's plan filled at its own peak
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
    case MirrorStrategy::budget: best = plan_budget(ctx); break;
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
      if (mode.sublinear_fill) fills = fill_at_own_peak(ctx, best.mirror);
      break;
    }
  }
  ctx.finish_order(best);
  ctx.place(best, mode.placement_seconds);
  if (mode.mirror == MirrorStrategy::sublinear && mode.sublinear_fill) {
    // sublinear: a fill of Chen's plan replaces it when, finished the same way, its total is no
    // larger and it recomputes less (the least recompute cost, then the least total, of the two).
    const MemoryReport chen = best.planned.report;
    for (MirrorResult& f : fills) {
      // (at most kFillPlacementSeconds: where the fill packs no lower than Chen's plan, e.g.
      // DenseNet-121's, the search would run to the limit in vain)
      ctx.finish_order(f);
      ctx.place(f, std::min(mode.placement_seconds, kFillPlacementSeconds));
      const MemoryReport &r = f.planned.report, &b = best.planned.report;
      if (r.total_bytes <= chen.total_bytes &&
          (r.recompute_cost < b.recompute_cost || (r.recompute_cost == b.recompute_cost && r.total_bytes < b.total_bytes))) {
        f.search = std::move(best.search);
        best = std::move(f);
        best.filled = true;
      }
    }
    // A fill chosen above its live-bytes bound gets the rest of the placement time, as the plan
    // chosen would have.
    if (best.filled) ctx.place(best, mode.placement_seconds - kFillPlacementSeconds);
    best.chen_total = chen.total_bytes, best.chen_recompute_flops = chen.recompute_flops, best.chen_recompute_cost = chen.recompute_cost;
  }
  best.planning_seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  best.planned.report.mode = mode.name;
  best.planned.report.planning_seconds = best.planning_seconds;
  return best;
}

}  // namespace mnemo
