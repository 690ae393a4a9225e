// The schedule order pass (see order.h): dependencies, list scheduling, OLLA's programme.
#include "memory/order.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <limits>
#include <map>
#include <numeric>

#include "memory/liveness.h"
#include "memory/milp.h"

namespace mnemo {

namespace {

// The programme is not built above this many columns (CBC's LP alone outran a 10 s limit by
// minutes at 400000): the better of the default and greedy orders is kept, bounded by the
// forward pass's peak.
constexpr size_t kMaxColumns = 20000;
// Bytes in units of 1/4096 of the default order's peak (rows of the same magnitude on every net).
constexpr double kUnitsPerPeak = 4096;
// CBC stops when its incumbent is within this fraction of its bound.
constexpr double kOrderGap = 1e-4;

bool in_place_update(const Node& n) { return !n.op->updates.empty(); }
// Inputs and params: bound from outside, no planned memory.
bool is_leaf(const Node& n) { return n.is(OpKind::input) || n.is(OpKind::param); }

// The memory of the step as liveness sees it: one item per planned (owning) compute output.
struct Items {
  std::vector<int64_t> bytes;                // aligned
  std::vector<int> producer;
  std::vector<char> pinned;                  // a graph output or state-update value: live to the end
  std::vector<char> inplace_capable;         // its producer may write it over an input of its size
  std::vector<std::vector<int>> readers;     // distinct reading nodes (views included), ascending
  std::vector<std::vector<int>> reads;       // [node] distinct items it reads
  std::vector<std::vector<int>> made;        // [node] items it produces
};

Items items_of(const Graph& g) {
  const int n = static_cast<int>(g.size());
  Items it;
  std::vector<std::vector<int>> id(n);
  it.reads.resize(n), it.made.resize(n);
  for (int v = 0; v < n; ++v) {
    const Node& node = g.node(v);
    id[v].assign(node.outputs.size(), -1);
    if (!node.is(OpKind::compute)) continue;
    for (size_t j = 0; j < node.outputs.size(); ++j) {
      if (aliased_input(node, j)) continue;
      const int64_t b = static_cast<int64_t>(node.outputs[j].bytes());
      bool capable = false;
      for (const InplaceOption& o : node.op->inplace)
        if (o.output == static_cast<int>(j) && applies(o, node) &&
            static_cast<int64_t>(g.type(node.inputs[o.input]).bytes()) == b)
          capable = true;
      id[v][j] = static_cast<int>(it.bytes.size());
      it.bytes.push_back(align_up(b));
      it.producer.push_back(v);
      it.pinned.push_back(0);
      it.inplace_capable.push_back(capable);
      it.readers.emplace_back();
      it.made[v].push_back(id[v][j]);
    }
  }
  auto item = [&](EntryRef e) {
    const EntryRef o = owning_entry(g, e);
    return id[o.node][o.index];
  };
  for (int v = 0; v < n; ++v)
    for (const EntryRef& e : g.node(v).inputs)
      if (const int i = item(e); i >= 0 && (it.readers[i].empty() || it.readers[i].back() != v)) {
        it.readers[i].push_back(v);
        it.reads[v].push_back(i);
      }
  for (auto& r : it.reads) r.erase(std::unique(r.begin(), r.end()), r.end());
  std::vector<EntryRef> keep = g.outputs;
  for (const StateUpdate& u : g.state_updates) keep.push_back(u.value);
  for (const EntryRef& e : keep)
    if (const int i = item(e); i >= 0) it.pinned[i] = 1;
  return it;
}

std::vector<std::vector<int>> successors(const std::vector<std::vector<int>>& preds) {
  std::vector<std::vector<int>> succ(preds.size());
  for (size_t v = 0; v < preds.size(); ++v)
    for (int u : preds[v]) succ[u].push_back(static_cast<int>(v));
  return succ;
}

// List scheduling of the nodes after the forward pass: each time, of the ready nodes, the least
// `key` (then the earliest id).
template <class Key>
std::vector<int> list_schedule(int F, const std::vector<std::vector<int>>& preds, Key key) {
  const int n = static_cast<int>(preds.size());
  const std::vector<std::vector<int>> succ = successors(preds);
  std::vector<int> order(F), waiting(n, 0), ready;
  std::iota(order.begin(), order.end(), 0);
  for (int v = F; v < n; ++v)
    if ((waiting[v] = static_cast<int>(preds[v].size())) == 0) ready.push_back(v);
  while (!ready.empty()) {
    size_t best = 0;
    auto best_key = key(ready[0]);
    for (size_t k = 1; k < ready.size(); ++k) {
      const auto kk = key(ready[k]);
      if (kk < best_key || (kk == best_key && ready[k] < ready[best])) best = k, best_key = kk;
    }
    const int v = ready[best];
    ready[best] = ready.back();
    ready.pop_back();
    order.push_back(v);
    key.done(v);
    for (int s : succ[v])
      if (--waiting[s] == 0) ready.push_back(s);
  }
  MNEMO_ASSERT(static_cast<int>(order.size()) == n) << "order: the dependencies have a cycle";
  return order;
}

// greedy's key: the bytes a node adds (its outputs minus the items its reads free); leaves
// (inputs, params: no planned memory) first.
struct LeastAdded {
  const Graph& g;
  const Items& it;
  std::vector<int> left;  // readers not yet scheduled, per item
  LeastAdded(const Graph& graph, const Items& items, int F) : g(graph), it(items), left(items.bytes.size(), 0) {
    for (size_t i = 0; i < it.bytes.size(); ++i)
      for (int r : it.readers[i])
        if (r >= F) ++left[i];
  }
  int64_t operator()(int v) const {
    if (is_leaf(g.node(v))) return std::numeric_limits<int64_t>::min();
    int64_t added = 0;
    for (int i : it.made[v])
      if (it.pinned[i] || !it.readers[i].empty()) added += it.bytes[i];
    for (int i : it.reads[v])
      if (left[i] == 1 && !it.pinned[i]) added -= it.bytes[i];
    return added;
  }
  void done(int v) {
    for (int i : it.reads[v]) --left[i];
  }
};

// updates-last's key: updates after everything else, in their order.
struct UpdatesLast {
  const Graph& g;
  int operator()(int v) const { return in_place_update(g.node(v)) ? 1 : 0; }
  void done(int) {}
};

// OLLA's programme over the positions t = 0 .. T-1 of the T nodes after the forward pass:
// x[v][t] = 1 when node v runs at t, s[v][t] = 1 when it has run by t (cumulative), L[i][t] = 1
// when item i is live at t; minimise the peak P of the live bytes at every step. Each variable
// exists only inside its node's window [asap, alap] (the longest dependency paths from the start
// and to the end); outside it the values are constants. With in-place allowed an output that its
// producer may write over an input of its size is not counted at its own step (the input it
// would take over is): a relaxation, so the bound holds for the exact peak.
struct Programme {
  Lp lp;
  int F = 0, T = 0;
  std::vector<int> asap, alap;                    // per node >= F (indexed v - F)
  std::vector<std::map<int, int>> x, s;           // [v - F]: t -> column
  int P = -1;
  double unit = 1;
  bool too_large = false;
  size_t columns = 0;  // (when too large: at least this many)
};

Programme build_programme(const TrainingGraph& tg, const std::vector<PreparedKernel>& kernels,
                          const std::vector<std::vector<int>>& preds, const Items& it, bool inplace, int64_t forward_peak,
                          int64_t default_peak) {
  const Graph& g = tg.graph;
  Programme pr;
  const int n = static_cast<int>(g.size()), F = tg.num_forward, T = n - F;
  pr.F = F, pr.T = T;
  pr.unit = std::max(1.0, static_cast<double>(default_peak) / kUnitsPerPeak);
  // Leaves (inputs and params: the learning rate, the velocities) hold no planned memory: they
  // are placed first, in their order, which narrows every window without changing any peak.
  // (Only when they come first already, as the optimiser pass adds them: dependencies keep
  // pointing to smaller ids.)
  std::vector<std::vector<int>> deps = preds;
  int leaves = F;
  while (leaves < n && is_leaf(g.node(leaves))) ++leaves;
  bool leaves_first = leaves > F;
  for (int v = leaves; v < n; ++v) leaves_first &= !is_leaf(g.node(v));
  if (leaves_first)
    for (int v = F + 1; v < n; ++v) deps[v].push_back(std::min(v, leaves) - 1);
  const std::vector<std::vector<int>> succ = successors(deps);
  pr.asap.assign(T, 0), pr.alap.assign(T, T - 1);
  // (every dependency has a smaller id: ascending ids are a topological order)
  for (int v = F; v < n; ++v)
    for (int u : deps[v]) pr.asap[v - F] = std::max(pr.asap[v - F], pr.asap[u - F] + 1);
  for (int v = n - 1; v >= F; --v)
    for (int w : succ[v]) pr.alap[v - F] = std::min(pr.alap[v - F], pr.alap[w - F] - 1);
  size_t columns = 0;
  for (int r = 0; r < T; ++r) columns += 2 * static_cast<size_t>(pr.alap[r] - pr.asap[r] + 1);
  pr.columns = columns;
  if (columns > kMaxColumns) return pr.too_large = true, pr;
  Lp& lp = pr.lp;
  pr.x.resize(T), pr.s.resize(T);
  for (int r = 0; r < T; ++r) {
    for (int t = pr.asap[r]; t <= pr.alap[r]; ++t) pr.x[r][t] = lp.add_col(0, 1, 0, true);
    for (int t = pr.asap[r]; t < pr.alap[r]; ++t) pr.s[r][t] = lp.add_col(0, 1, 0, false);
    // s[t] = s[t-1] + x[t]; s at alap is 1.
    for (int t = pr.asap[r]; t <= pr.alap[r]; ++t) {
      std::vector<std::pair<int, double>> row{{pr.x[r][t], 1}};
      if (t > pr.asap[r]) row.emplace_back(pr.s[r][t - 1], 1);
      if (t < pr.alap[r]) row.emplace_back(pr.s[r][t], -1);
      lp.add_row(std::move(row), t < pr.alap[r] ? 0 : 1, t < pr.alap[r] ? 0 : 1);
    }
  }
  // One node per step.
  std::vector<std::vector<std::pair<int, double>>> at(T);
  for (int r = 0; r < T; ++r)
    for (const auto& [t, c] : pr.x[r]) at[t].emplace_back(c, 1);
  for (int t = 0; t < T; ++t) lp.add_row(std::move(at[t]), 1, 1);
  // done(v, t): has node v run by step t? A constant (0 or 1) or a column.
  struct Done {
    int col = -1;
    double value = 0;
  };
  auto done = [&](int v, int t) -> Done {
    if (v < F) return {-1, 1};
    const int r = v - F;
    if (t < pr.asap[r]) return {-1, 0};
    if (t >= pr.alap[r]) return {-1, 1};
    return {pr.s[r].at(t), 0};
  };
  // Dependencies: v done by t implies u done by t - 1.
  for (int v = F; v < n; ++v)
    for (int u : deps[v])
      for (int t = pr.asap[v - F]; t <= pr.alap[u - F]; ++t) {
        const Done a = done(v, t), b = done(u, t - 1);
        std::vector<std::pair<int, double>> row;
        double rhs = b.value - a.value;
        if (a.col >= 0) row.emplace_back(a.col, 1);
        if (b.col >= 0) row.emplace_back(b.col, -1);
        if (!row.empty()) lp.add_row(std::move(row), -kInf, rhs);
      }
  pr.P = lp.add_col(static_cast<double>(forward_peak) / pr.unit, kInf, 1, false);
  // Memory at each step: per step, the constant bytes and the terms.
  std::vector<double> constant(T, 0);
  std::vector<std::vector<std::pair<int, double>>> memory(T);
  for (int v = F; v < n; ++v)
    if (const double ws = static_cast<double>(align_up(static_cast<int64_t>(kernels[v].workspace))); ws > 0)
      for (const auto& [t, c] : pr.x[v - F]) memory[t].emplace_back(c, ws / pr.unit);
  for (size_t i = 0; i < it.bytes.size(); ++i) {
    const int p = it.producer[i];
    const bool late = inplace && it.inplace_capable[i];  // (counted from the step after its own)
    std::vector<int> readers;
    for (int r : it.readers[i])
      if (r >= F) readers.push_back(r);
    const double b = static_cast<double>(it.bytes[i]) / pr.unit;
    if (p < F && readers.empty()) {  // live at every step after the forward pass when pinned, else at none
      if (it.pinned[i])
        for (double& c : constant) c += b;
      continue;
    }
    for (int t = 0; t < T; ++t) {
      // Live at t when made by t (by t - 1 if late) and some reader has not run before t; or
      // pinned and made; or, read by no one, made exactly at t.
      std::vector<std::pair<Done, Done>> terms;  // (made, reader done before t): live >= made - done
      const Done made = done(p, late ? t - 1 : t);
      if (it.pinned[i]) terms.push_back({made, {-1, 0}});
      for (int r : readers) terms.push_back({made, done(r, t - 1)});
      if (readers.empty() && !it.pinned[i]) {
        if (late || p < F) continue;
        terms.push_back({made, done(p, t - 1)});
      }
      bool always = false, never = true;
      for (const auto& [m, d] : terms) {
        if (m.col < 0 && d.col < 0) {
          always |= m.value - d.value >= 1;
          continue;
        }
        if (!(m.col < 0 && m.value == 0) && !(d.col < 0 && d.value == 1)) never = false;
      }
      if (always) {
        constant[t] += b;
        continue;
      }
      if (never) continue;
      const int L = lp.add_col(0, 1, 0, false);
      for (const auto& [m, d] : terms) {
        if ((m.col < 0 && m.value == 0) || (d.col < 0 && d.value == 1)) continue;
        std::vector<std::pair<int, double>> row{{L, 1}};
        double lo = m.value - d.value;
        if (m.col >= 0) row.emplace_back(m.col, -1);
        if (d.col >= 0) row.emplace_back(d.col, 1);
        lp.add_row(std::move(row), lo, kInf);
      }
      memory[t].emplace_back(L, b);
    }
  }
  for (int t = 0; t < T; ++t) {
    memory[t].emplace_back(pr.P, -1);
    lp.add_row(std::move(memory[t]), -kInf, -constant[t]);
  }
  pr.columns = lp.lo.size();
  if (pr.columns > kMaxColumns) pr.too_large = true;
  return pr;
}

// The programme's values for `order` (a start for CBC).
std::vector<double> programme_values(const Programme& pr, const std::vector<int>& order) {
  std::vector<double> x(pr.lp.lo.size(), 0);
  for (int t = 0; t < pr.T; ++t) {
    const int r = order[pr.F + t] - pr.F;
    if (const auto c = pr.x[r].find(t); c != pr.x[r].end()) x[c->second] = 1;
    for (const auto& [u, col] : pr.s[r])
      if (u >= t) x[col] = 1;
  }
  return x;  // (the live and peak columns: CBC completes them)
}

// The order of a solution `x` (the forward nodes, then the node run at each step).
std::vector<int> programme_order(const Programme& pr, const std::vector<double>& x) {
  std::vector<int> order(pr.F + pr.T, -1);
  std::iota(order.begin(), order.begin() + pr.F, 0);
  for (int r = 0; r < pr.T; ++r)
    for (const auto& [t, c] : pr.x[r])
      if (x[c] > 0.5) order[pr.F + t] = pr.F + r;
  MNEMO_ASSERT(std::none_of(order.begin(), order.end(), [](int v) { return v < 0; })) << "order: a programme solution leaves a step empty";
  return order;
}

}  // namespace

ScheduleOrder parse_schedule_order(const std::string& name) {
  if (name == "default") return ScheduleOrder::default_order;
  if (name == "greedy") return ScheduleOrder::greedy;
  if (name == "optimal") return ScheduleOrder::optimal;
  if (name == "updates-last") return ScheduleOrder::updates_last;
  MNEMO_FAIL() << "unknown schedule order '" << name << "' (expected default, greedy, optimal or updates-last)";
}

const char* schedule_order_name(ScheduleOrder o) {
  switch (o) {
    case ScheduleOrder::default_order: return "default";
    case ScheduleOrder::greedy: return "greedy";
    case ScheduleOrder::optimal: return "optimal";
    case ScheduleOrder::updates_last: return "updates-last";
  }
  return "?";
}

std::vector<std::vector<int>> schedule_dependencies(const TrainingGraph& tg) {
  const Graph& g = tg.graph;
  const int n = static_cast<int>(g.size()), F = tg.num_forward;
  std::vector<std::vector<int>> preds(n);
  auto add = [&](int v, int u) {
    if (v >= F && u >= F && u != v) preds[v].push_back(u);
  };
  for (int v = F; v < n; ++v)
    for (const EntryRef& e : g.node(v).inputs) add(v, e.node);
  // Memory updated in place: its readers and updaters keep their order around each update.
  std::map<EntryRef, std::vector<int>> updaters;  // owning entry -> the nodes updating it, ascending
  for (int v = 0; v < n; ++v)
    for (const InplaceOption& u : g.node(v).op->updates) updaters[owning_entry(g, g.node(v).inputs[u.input])].push_back(v);
  std::map<EntryRef, std::vector<int>> touch;     // ... -> the nodes reading it, ascending
  for (int v = 0; v < n && !updaters.empty(); ++v)
    for (const EntryRef& e : g.node(v).inputs)
      if (const auto m = updaters.find(owning_entry(g, e)); m != updaters.end()) {
        std::vector<int>& list = touch[m->first];
        if (list.empty() || list.back() != v) list.push_back(v);
      }
  for (const auto& [mem, ups] : updaters) {
    const std::vector<int>& nodes = touch[mem];
    for (int v : nodes) {
      // the update before v (v follows it), and every update after v (each follows v)
      const auto after = std::upper_bound(ups.begin(), ups.end(), v);
      if (after != ups.begin()) add(v, *std::prev(after));
      for (auto w = after; w != ups.end(); ++w) add(*w, v);
    }
  }
  for (auto& p : preds) {
    std::sort(p.begin(), p.end());
    p.erase(std::unique(p.begin(), p.end()), p.end());
  }
  return preds;
}

void apply_order(TrainingGraph& tg, std::vector<PreparedKernel>& kernels, const std::vector<int>& order) {
  Graph& old = tg.graph;
  const int n = static_cast<int>(old.size());
  MNEMO_ASSERT(static_cast<int>(order.size()) == n && kernels.size() == old.size()) << "apply_order: sizes differ";
  std::vector<int> new_id(n, -1);
  for (int k = 0; k < n; ++k) new_id[order[k]] = k;
  auto remap = [&](EntryRef e) { return e.valid() ? EntryRef{new_id[e.node], e.index} : e; };
  Graph g;
  std::vector<PreparedKernel> ks(n);
  for (int k = 0; k < n; ++k) {
    Node node = std::move(old.node(order[k]));
    for (EntryRef& e : node.inputs) e = remap(e);
    MNEMO_ASSERT(g.push(std::move(node)) == k) << "apply_order";
    ks[k] = std::move(kernels[order[k]]);
  }
  for (const EntryRef& e : old.outputs) g.outputs.push_back(remap(e));
  for (const StateUpdate& u : old.state_updates) g.state_updates.push_back({new_id[u.param], remap(u.value)});
  tg.graph = std::move(g);
  kernels = std::move(ks);
  tg.loss = remap(tg.loss);
  for (ParamGrad& pg : tg.grads) pg.param = new_id[pg.param], pg.grad = remap(pg.grad);
  if (tg.lr >= 0) tg.lr = new_id[tg.lr];
  for (int& v : tg.optimizer_state) v = new_id[v];
  tg.status = remap(tg.status);
}

OrderReport reorder_step(TrainingGraph& tg, std::vector<PreparedKernel>& kernels, ScheduleOrder order, bool allow_inplace,
                         double seconds) {
  const auto t0 = std::chrono::steady_clock::now();
  OrderReport rep;
  rep.order = schedule_order_name(order);
  const int n = static_cast<int>(tg.graph.size()), F = tg.num_forward;
  rep.region = n - F;
  std::vector<int> identity(n);
  std::iota(identity.begin(), identity.end(), 0);
  // The default order's liveness: its peak (and, below, its forward steps' peak).
  const Liveness base = analyze_liveness(tg.graph, allow_inplace, kernels);
  rep.default_peak = rep.peak = max_live_bytes(base, true);
  if (order == ScheduleOrder::default_order || rep.region == 0) return rep;
  const std::vector<std::vector<int>> preds = schedule_dependencies(tg);
  std::vector<int> chosen = identity;
  // A candidate is judged by the exact liveness of its order (no graph is rebuilt for it).
  auto consider = [&](std::vector<int> o, const char* name, bool always) {
    if (o == chosen) return;
    const int64_t p = max_live_bytes(analyze_liveness(tg.graph, allow_inplace, kernels, o), true);
    if (always || p < rep.peak) rep.peak = p, rep.chosen = name, chosen = std::move(o);
  };
  if (order == ScheduleOrder::updates_last) {
    consider(list_schedule(F, preds, UpdatesLast{tg.graph}), "updates-last", true);
  } else {
    // The peak over the forward steps bounds every order's (the forward nodes do not move, and
    // what they make is live until read).
    const int64_t forward_peak = max_live_bytes(base, true, F);
    rep.bound = forward_peak;
    rep.status = "bound: the forward pass's peak";
    const Items it = items_of(tg.graph);
    if (rep.peak > forward_peak) consider(list_schedule(F, preds, LeastAdded(tg.graph, it, F)), "greedy", false);
    if (rep.peak <= forward_peak) {
      rep.status = "optimal: the peak is the forward pass's";
    } else if (order == ScheduleOrder::optimal) {
      const Programme pr = build_programme(tg, kernels, preds, it, allow_inplace, forward_peak, rep.default_peak);
      if (pr.too_large) {
        rep.status = "programme too large (" + std::to_string(pr.columns) + "+ columns, at most " + std::to_string(kMaxColumns) +
                     "): the better of default and greedy, bound: the forward pass's peak";
      } else {
        const std::vector<double> start = programme_values(pr, chosen);
        // Without CBC's preprocessing: on this programme (ResNet-20's step with cuDNN's workspaces,
        // 14 885 columns) the root LP takes most of the time, and the preprocessing after it
        // crashed CBC 2.10 (a segmentation fault in CglPreProcess::postProcess, on an H200's host)
        // or claimed the programme infeasible (on this project's 2-core machine); without it, CBC
        // stops at the limit with the start and the LP's bound.
        const Solved s = run_milp(pr.lp, seconds, kInf, kOrderGap, &start, /*preprocess=*/false);
        rep.status = s.optimal              ? "optimal"
                     : s.time_limit         ? "time limit"
                     : s.infeasible         ? "infeasible"
                     : s.claimed_infeasible ? "CBC claimed infeasible with a valid order as its start: not believed, no bound"
                                            : "stopped";
        // The bound in bytes: every peak is a multiple of the arena alignment, so the bound rounds
        // up to one (less a thousandth of it for CBC's tolerances, far below them in bytes).
        const double bound_bytes = std::max(s.bound * pr.unit, static_cast<double>(forward_peak));
        const double a = static_cast<double>(kArenaAlignment);
        rep.bound = std::max<int64_t>(0, static_cast<int64_t>(std::ceil(bound_bytes / a - 1e-3)) * kArenaAlignment);
        if (s.solution) consider(programme_order(pr, s.x), "optimal", false);
      }
    }
  }
  for (int k = 0; k < n; ++k) rep.moved += chosen[k] != k;
  if (rep.moved) apply_order(tg, kernels, chosen);
  rep.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  return rep;
}

}  // namespace mnemo
