// budget=SIZE's exact solver: the programme of memory/budget_exact.h, built for CBC.
#include "memory/budget_exact.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <limits>
#include <map>
#include <set>

#include "core/memory_plan.h"
#include "memory/milp.h"

namespace mnemo {

namespace {

// Bytes are counted in units of 1/4096 of the arena limit, so that the memory rows are of the
// same magnitude on every net (in MiB, a small net's rows are ~1e-4 and CBC's preprocessing
// declared a programme with a zero-cost solution infeasible).
constexpr double kUnitsPerLimit = 4096;
double byte_unit(int64_t arena_limit) { return std::max(1.0, static_cast<double>(arena_limit) / kUnitsPerLimit); }
// Recompute costs likewise in units of 1/10000 of the forward pass's cost (in GFLOP, a small
// net's costs are ~1e-8, below CBC's tolerances, and it returned plans 7x the optimum as optimal).
constexpr double kUnitsPerForward = 1e4;

// What the programme needs of the graphs: per compute node its kept-value bytes and readers, the
// constants of every gap.
struct Model {
  int F = 0, M = 0;                        // forward nodes; backward nodes of the keep-all step
  int mirrorable = 0;                      // forward nodes [0, mirrorable) may be dropped
  std::vector<int> nodes;                  // forward compute nodes (the k_v, r_v columns)
  std::vector<int> col;                    // forward node -> index in `nodes`, -1
  std::vector<double> cost;                // per node (Cost::roofline), in units of cost_unit
  double cost_unit = 1;
  std::vector<std::vector<int>> consumers; // compute node -> compute nodes reading it (indices)
  struct Read {                            // an output of a compute node backward reads
    int node;                              // index in `nodes`
    double mib;                            // aligned bytes, MiB
    int first, last;                       // backward nodes reading it (first and last)
    int free_at;                           // forward gap from which it is held only for backward
  };
  std::vector<Read> reads;
  std::vector<char> has_read;              // per index: some output is read by backward
  std::vector<char> backward_reads;        // ... or a graph output of it is (has_read leaves those out)
  struct Held {                            // an output no backward node reads, read by compute nodes
    int node;                              // index in `nodes`
    double mib;
    int free_at;                           // forward gap from which it is held only for recomputation
    std::vector<int> readers;              // indices of the compute nodes reading it
  };
  std::vector<Held> held;
  std::vector<double> fwd_const, bwd_const;  // MiB in flight at each gap, the same in every plan
};

Model build_model(const Graph& forward, const TrainingGraph& tg, double unit, const Device* device, double balance) {
  Model md;
  const Graph& g = tg.graph;
  // The training graph's forward part: the forward graph and what the gradient pass appended to
  // it (the loss seed), which is never dropped.
  const Graph& fwd = g;
  md.mirrorable = static_cast<int>(forward.size());
  md.F = tg.num_forward;
  md.M = static_cast<int>(g.size()) - md.F;
  md.col.assign(md.F, -1);
  for (int v = 0; v < md.F; ++v)
    if (fwd.node(v).is(OpKind::compute)) {
      md.col[v] = static_cast<int>(md.nodes.size());
      md.nodes.push_back(v);
      md.cost.push_back(recompute_cost(fwd, v).roofline(balance));
    }
  double forward_cost = 0;
  for (double c : md.cost) forward_cost += c;
  md.cost_unit = std::max(1.0, forward_cost / kUnitsPerForward);
  for (double& c : md.cost) c /= md.cost_unit;
  const size_t n = md.nodes.size();
  md.consumers.resize(n);
  auto mib = [unit](int64_t bytes) { return static_cast<double>(align_up(bytes)) / unit; };
  // Per forward entry (owner): last forward reader, backward readers, pinned (a graph output).
  struct Info {
    int last_fwd = -1, first = std::numeric_limits<int>::max(), last = -1;
    bool pinned = false;
    std::vector<int> readers;
  };
  std::vector<std::vector<Info>> info(md.F);
  for (int v = 0; v < md.F; ++v) info[v].resize(fwd.node(v).outputs.size());
  auto planned = [&](EntryRef e) { return e.node < md.F && md.col[e.node] >= 0 && !aliased_input(g.node(e.node), e.index); };
  for (int u = 0; u < md.F; ++u) {
    const Node& node = fwd.node(u);
    if (node.is(OpKind::view)) continue;  // its readers read the owner
    for (const EntryRef& x : node.inputs) {
      const EntryRef e = owning_entry(fwd, x);
      if (!planned(e)) continue;
      Info& in = info[e.node][e.index];
      in.last_fwd = std::max(in.last_fwd, u);
      if (md.col[u] >= 0) {
        if (std::find(in.readers.begin(), in.readers.end(), md.col[u]) == in.readers.end()) in.readers.push_back(md.col[u]);
        std::vector<int>& c = md.consumers[md.col[e.node]];
        if (std::find(c.begin(), c.end(), md.col[u]) == c.end()) c.push_back(md.col[u]);
      }
    }
  }
  // Backward: readers of forward results; backward's own entries in flight.
  std::vector<double> bwd_delta(md.M + 1, 0);
  std::vector<std::vector<int>> last_read(g.size());
  for (size_t id = md.F; id < g.size(); ++id) last_read[id].assign(g.node(static_cast<int>(id)).outputs.size(), -1);
  for (int k = 0; k < md.M; ++k) {
    const Node& b = g.node(md.F + k);
    if (b.is(OpKind::view)) continue;
    for (const EntryRef& x : b.inputs) {
      const EntryRef e = owning_entry(g, x);
      if (e.node < md.F) {
        if (!planned(e)) continue;
        Info& in = info[e.node][e.index];
        in.first = std::min(in.first, k), in.last = std::max(in.last, k);
      } else {
        last_read[e.node][e.index] = std::max(last_read[e.node][e.index], k);
      }
    }
  }
  std::vector<EntryRef> keep = g.outputs;
  for (const StateUpdate& s : g.state_updates) keep.push_back(s.value);
  for (const EntryRef& x : keep) {
    const EntryRef e = owning_entry(g, x);
    if (e.node < md.F) {
      if (planned(e)) info[e.node][e.index].pinned = true;
    } else if (!aliased_input(g.node(e.node), e.index)) {
      last_read[e.node][e.index] = md.M;  // to the end
    }
  }
  // During step k its own workspace and the outputs it writes (those it may write in place over
  // an input are not counted: the input is).
  const std::vector<PreparedKernel> kernels = prepare_kernels(g, device);
  std::vector<double> step_own(g.size(), 0);
  for (size_t id = 0; id < g.size(); ++id) {
    const Node& node = g.node(static_cast<int>(id));
    if (!node.is(OpKind::compute)) continue;
    step_own[id] = kernels[id].workspace ? mib(static_cast<int64_t>(kernels[id].workspace)) : 0;
    if (static_cast<int>(id) < md.F) continue;  // (forward outputs are counted from their step on)
    for (size_t j = 0; j < node.outputs.size(); ++j) {
      if (aliased_input(node, j)) continue;
      const auto& ip = node.op->inplace;
      if (std::any_of(ip.begin(), ip.end(), [&](const InplaceOption& o) { return o.output == static_cast<int>(j) && applies(o, node); }))
        continue;
      step_own[id] += mib(static_cast<int64_t>(node.outputs[j].bytes()));
    }
  }
  for (int k = 0; k < md.M; ++k) {
    const Node& b = g.node(md.F + k);
    // Only computed entries are in the arena: optimiser state (the velocity params the update
    // appends after the forward pass) and inputs are not, nor are views (their owners are counted).
    if (!b.is(OpKind::compute)) continue;
    for (size_t j = 0; j < b.outputs.size(); ++j) {
      if (aliased_input(b, j) || last_read[md.F + k][j] <= k) continue;
      const double a = mib(static_cast<int64_t>(b.outputs[j].bytes()));
      bwd_delta[k + 1] += a;  // live across the gaps after it, up to its last reader
      bwd_delta[std::min(md.M, last_read[md.F + k][j] + 1)] -= a;
    }
  }
  // Forward constants (values in flight, pinned ones to the end), backward constants (pinned
  // forward results, results read at or around the gap), and the variable reads.
  std::vector<double> fwd_delta(md.F + 1, 0);
  double pinned_mib = 0;
  md.has_read.assign(n, 0);
  md.backward_reads.assign(n, 0);
  for (size_t i = 0; i < n; ++i) {
    const int v = md.nodes[i];
    const Node& node = fwd.node(v);
    for (size_t j = 0; j < node.outputs.size(); ++j) {
      if (aliased_input(node, j)) continue;
      const Info& in = info[v][j];
      const double a = mib(static_cast<int64_t>(node.outputs[j].bytes()));
      // A saved output a node recomputes from (OpDef::recompute_as): backward and the node's
      // copies read the forward node's, so it is live from its step to its last backward reader
      // in every plan (a constant), and does not make the node kept or recomputed.
      if (v < md.mirrorable && !in.pinned && in.last >= 0 && read_from_forward(node, static_cast<int>(j))) {
        fwd_delta[v] += a;  // (to the end of the forward pass)
        bwd_delta[0] += a;
        bwd_delta[in.last + 1] -= a;
        continue;
      }
      if (in.last >= 0) md.backward_reads[i] = 1;
      if (in.pinned) {
        fwd_delta[v] += a;
        pinned_mib += a;
        continue;
      }
      if (in.last_fwd > v) fwd_delta[v] += a, fwd_delta[in.last_fwd] -= a;
      if (in.last >= 0) {
        md.reads.push_back({static_cast<int>(i), a, in.first, in.last, std::max(v, in.last_fwd)});
        bwd_delta[in.first] += a;  // read at or around the gap: live whatever the plan
        bwd_delta[in.last + 1] -= a;
        md.has_read[i] = 1;
      } else if (!in.readers.empty()) {
        md.held.push_back({static_cast<int>(i), a, in.last_fwd, in.readers});
      }
    }
  }
  md.fwd_const.assign(md.F, 0);
  double live = 0;
  for (int t = 0; t < md.F; ++t) md.fwd_const[t] = (live += fwd_delta[t]) + step_own[t];
  md.bwd_const.assign(md.M, 0);
  live = 0;
  for (int k = 0; k < md.M; ++k) md.bwd_const[k] = (live += bwd_delta[k]) + pinned_mib + step_own[md.F + k];
  return md;
}

// CBC stops when its incumbent is within this fraction of its bound.
constexpr double kRelativeGap = 0.02;
// The exact solver adds at most this many of the gaps a solution that does not fit overfills
// (docs/BENCHMARKS.md "The exact solver's solutions checked on every gap": 8 and 16 found the same
// plans on six budgets of ResNet-20 and ResNet-56).
constexpr int kGapsPerSolution = 8;

// Columns: k (binary), r, then per modelled gap C and the held values D.
struct Built {
  Lp lp;
  std::vector<int> k, r;
};

// Per compute node: 1 when backward reads its result at or before backward gap g (a result still
// read after g must then be kept or recomputed into a copy that lives across g).
std::vector<char> read_by_gap(const Model& md, int g) {
  std::vector<char> seed(md.nodes.size(), 0);
  for (const Model::Read& rd : md.reads)
    if (rd.first <= g) seed[rd.node] = 1;
  return seed;
}

Built build_lp(const Model& md, double limit_mib, const std::vector<int>& fwd_gaps, const std::vector<int>& bwd_gaps,
               const std::vector<std::vector<signed char>>& cuts, bool integer) {
  Built b;
  Lp& lp = b.lp;
  const size_t n = md.nodes.size();
  for (size_t i = 0; i < n; ++i) b.k.push_back(lp.add_col(md.nodes[i] < md.mirrorable ? 0 : 1, 1, 0, integer));
  for (size_t i = 0; i < n; ++i) b.r.push_back(lp.add_col(0, 1, md.cost[i], false));
  // A result backward reads is kept or recomputed; a recomputed node's inputs are kept or
  // recomputed.
  for (size_t i = 0; i < n; ++i) {
    if (md.has_read[i]) lp.add_row({{b.r[i], 1}, {b.k[i], 1}}, 1, kInf);
    for (int u : md.consumers[i]) lp.add_row({{b.r[i], 1}, {b.k[i], 1}, {b.r[u], -1}}, 0, kInf);
  }
  // A kept output no backward node reads is held (E) when a node reading it is recomputed.
  std::vector<int> e_col;
  for (const Model::Held& h : md.held) {
    e_col.push_back(lp.add_col(0, 1, 0, false));
    for (int u : h.readers) lp.add_row({{e_col.back(), 1}, {b.k[h.node], -1}, {b.r[u], -1}}, -1, kInf);
  }
  // Forward gaps: values in flight, and results kept so far whose forward readers are done.
  for (int t : fwd_gaps) {
    std::vector<std::pair<int, double>> terms;
    std::vector<double> per(n, 0);
    for (const Model::Read& rd : md.reads)
      if (rd.free_at <= t) per[rd.node] += rd.mib;
    for (size_t i = 0; i < n; ++i)
      if (per[i] > 0) terms.emplace_back(b.k[i], per[i]);
    for (size_t h = 0; h < md.held.size(); ++h)
      if (md.held[h].free_at <= t) terms.emplace_back(e_col[h], md.held[h].mib);
    lp.add_row(std::move(terms), -kInf, limit_mib - md.fwd_const[t]);
  }
  // Backward gaps.
  for (int g : bwd_gaps) {
    // needed: a recomputed copy may exist before the gap (a result read before it, or an input
    // of one, transitively). Compute nodes are in topological order, so one backward sweep.
    const std::vector<char> seed = read_by_gap(md, g);
    std::vector<char> needed(n, 0);
    for (size_t ii = n; ii-- > 0;) {
      needed[ii] = seed[ii];
      for (int u : md.consumers[ii]) needed[ii] |= needed[u];
    }
    std::vector<int> c(n, -1);
    for (size_t i = 0; i < n; ++i)
      if (needed[i]) c[i] = lp.add_col(0, 1, 0, false);
    for (size_t i = 0; i < n; ++i) {
      if (c[i] < 0) continue;
      lp.add_row({{c[i], 1}, {b.k[i], 1}}, -kInf, 1);  // a copy only of a result not kept
      lp.add_row({{b.r[i], 1}, {c[i], -1}}, 0, kInf);  // made: recomputed
      if (seed[i]) lp.add_row({{c[i], 1}, {b.k[i], 1}}, 1, kInf);
      for (int u : md.consumers[i])
        if (c[u] >= 0) lp.add_row({{c[i], 1}, {b.k[i], 1}, {c[u], -1}}, 0, kInf);
    }
    std::vector<double> per_k(n, 0), per_c(n, 0);
    for (const Model::Read& rd : md.reads)
      if (rd.first > g) per_k[rd.node] += rd.mib, per_c[rd.node] += rd.mib;
    std::vector<std::pair<int, double>> terms;
    for (size_t i = 0; i < n; ++i) {
      if (per_k[i] > 0) terms.emplace_back(b.k[i], per_k[i]);
      if (per_c[i] > 0 && c[i] >= 0) terms.emplace_back(c[i], per_c[i]);
    }
    // A held output is live across the gap when a node reading it is recomputed after it.
    for (const Model::Held& h : md.held) {
      const int d = lp.add_col(0, 1, 0, false);
      for (int u : h.readers) {
        std::vector<std::pair<int, double>> row{{d, 1}, {b.k[h.node], -1}, {b.r[u], -1}};
        if (c[u] >= 0) row.emplace_back(c[u], 1);
        lp.add_row(std::move(row), -1, kInf);
      }
      terms.emplace_back(d, h.mib);
    }
    lp.add_row(std::move(terms), -kInf, limit_mib - md.bwd_const[g]);
  }
  // Plans cut off: each at least one k different.
  // Plans cut off: each at least one k different among the nodes the cut names (1 kept, 0
  // dropped, -1 not named).
  for (const std::vector<signed char>& cut : cuts) {
    std::vector<std::pair<int, double>> terms;
    double ones = 0;
    for (size_t i = 0; i < n; ++i) {
      if (cut[i] < 0) continue;
      terms.emplace_back(b.k[i], cut[i] ? -1.0 : 1.0);
      ones += cut[i];
    }
    lp.add_row(std::move(terms), 1 - ones, kInf);
  }
  return b;
}

// The gaps a programme models (forward gap t; backward gap g: before the g-th backward node).
struct Gaps {
  std::set<int> fwd, bwd;
};

// Gaps not modelled that an LP solution (k, r per node) overfills, by how much (units), the most
// first. A backward gap's copies are taken at their least (each result read up to the gap and each
// input of a copy, not kept: a copy of what is not kept of it) and its held outputs at what those
// copies leave; a gap whose least copies exceed what the solution recomputes is overfilled by the
// limit (its structure rows fail). Adding a gap only adds constraints (its rows and the copy columns
// they need), so any bound stays proven; the sums here only choose which gaps to add.
std::vector<std::pair<double, int>> overfilled_gaps(const Model& md, double limit, const Gaps& gaps, const std::vector<double>& k,
                                                    const std::vector<double>& r) {
  const size_t n = md.nodes.size();
  constexpr double kTol = 1e-6;
  std::vector<std::pair<double, int>> out;  // (excess, gap: forward t, backward F + g)
  std::vector<double> held_e(md.held.size(), 0);
  for (size_t h = 0; h < md.held.size(); ++h)
    for (int u : md.held[h].readers) held_e[h] = std::max(held_e[h], k[md.held[h].node] + r[u] - 1);
  // Forward gaps: the kept results freed by then, by free_at (a running sum over t).
  {
    std::vector<double> at(md.F + 1, 0);
    for (const Model::Read& rd : md.reads) at[std::min(md.F, std::max(0, rd.free_at))] += rd.mib * k[rd.node];
    for (size_t h = 0; h < md.held.size(); ++h) at[std::min(md.F, std::max(0, md.held[h].free_at))] += md.held[h].mib * held_e[h];
    double sum = 0;
    for (int t = 0; t < md.F; ++t) {
      sum += at[t];
      const double excess = sum - (limit - md.fwd_const[t]);
      if (excess > kTol && !gaps.fwd.count(t)) out.push_back({excess, t});
    }
  }
  std::vector<double> c(n);
  for (int g = 0; g < md.M; ++g) {
    if (gaps.bwd.count(g)) continue;
    const std::vector<char> seed = read_by_gap(md, g);
    bool broken = false;
    for (size_t ii = n; ii-- > 0;) {
      double need = seed[ii] ? 1 : 0;
      for (int u : md.consumers[ii]) need = std::max(need, c[u]);
      c[ii] = std::max(0.0, need - k[ii]);
      broken = broken || c[ii] > r[ii] + kTol;
    }
    double sum = 0;
    for (const Model::Read& rd : md.reads)
      if (rd.first > g) sum += rd.mib * (k[rd.node] + c[rd.node]);
    for (size_t h = 0; h < md.held.size(); ++h) {
      double d = 0;
      for (int u : md.held[h].readers) d = std::max(d, k[md.held[h].node] + r[u] - c[u] - 1);
      sum += md.held[h].mib * d;
    }
    const double excess = broken ? limit : sum - (limit - md.bwd_const[g]);
    if (excess > kTol) out.push_back({excess, md.F + g});
  }
  std::sort(out.begin(), out.end(), [](const auto& a, const auto& b) { return a.first > b.first; });
  return out;
}

// The gaps modelled first: the end of the forward pass and the forward gaps with the most in
// flight; backward gaps spread evenly and those with the most that is live whatever the plan.
Gaps starting_gaps(const Model& md, int max_gaps) {
  Gaps gaps{{md.F - 1}, {}};
  std::vector<int> by(md.F);
  for (int t = 0; t < md.F; ++t) by[t] = t;
  std::sort(by.begin(), by.end(), [&](int a, int b) { return md.fwd_const[a] > md.fwd_const[b]; });
  for (int i = 0; i < std::min(md.F, 4); ++i) gaps.fwd.insert(by[i]);
  const int half = std::max(1, max_gaps / 2);
  for (int i = 0; i < half && md.M > 0; ++i) gaps.bwd.insert(static_cast<int>(static_cast<int64_t>(i) * md.M / half));
  std::vector<int> bk(md.M);
  for (int k = 0; k < md.M; ++k) bk[k] = k;
  std::sort(bk.begin(), bk.end(), [&](int a, int b) { return md.bwd_const[a] > md.bwd_const[b]; });
  for (int i = 0; i < std::min(md.M, half); ++i) gaps.bwd.insert(bk[i]);
  return gaps;
}

// The LP relaxation's bound (cost, proven) with its cutting rounds: solve, model the gaps the
// solution overfills (the most overfilled first, lp_gaps_per_round a round) and solve again. Rounds
// by time (`lp_round_seconds`): the next LP is larger, so a round starts only when twice the last
// solve's time still fits; else by size: while the LP has at most lp_round_columns columns (the same
// rounds on every machine). `gaps` ends as the gaps of the last LP solved. `best`: the incumbent
// (units, kInf: none): the bound never exceeds it, and reaching it ends the rounds (it is optimal).
struct LpBound {
  double bound_cost = 0;
  std::string status;
  int solves = 0, columns = 0, rows = 0;
};
LpBound lp_bound(const Model& md, double limit, Gaps& gaps, double best, const ExactBudgetOptions& o,
                 const std::function<double()>& elapsed) {
  LpBound out;
  const double per_solve = std::max(1.0, o.seconds / 4);  // (CBC does not stop an LP at it)
  Gaps previous;             // the gaps of the last LP solved, while a round's are tried
  bool by_time = false;      // the round about to be solved was started by time, not by size
  for (int rounds = 0;;) {
    const double left = o.seconds - elapsed();
    if (left <= 0) {
      if (rounds > 0) gaps = std::move(previous);  // (the round was not solved)
      out.status = "time limit";
      return out;
    }
    const Built b = build_lp(md, limit, {gaps.fwd.begin(), gaps.fwd.end()}, {gaps.bwd.begin(), gaps.bwd.end()}, {}, false);
    if (rounds > 0 && !by_time && static_cast<int64_t>(b.lp.lo.size()) > o.lp_round_columns) {
      gaps = std::move(previous);  // over the size the rounds stop at: not solved, its gaps not modelled
      return out;
    }
    out.columns = static_cast<int>(b.lp.lo.size()), out.rows = static_cast<int>(b.lp.rows.size());
    const double solve_start = elapsed();
    const Solved s = run_milp(b.lp, std::min(left, per_solve), kInf, kRelativeGap);
    const double solve_seconds = elapsed() - solve_start;
    ++out.solves;
    if (s.infeasible) {  // nothing fits: the incumbent (if any) is optimal
      out.bound_cost = std::isfinite(best) ? best * md.cost_unit : kInf;
      out.status = std::isfinite(best) ? "optimal" : "infeasible";
      return out;
    }
    out.bound_cost = std::max(out.bound_cost, std::min(s.bound, best) * md.cost_unit);
    out.status = s.optimal ? "lp" : "lp (time limit)";
    by_time = o.lp_round_seconds > 0 && elapsed() + 2 * solve_seconds <= o.lp_round_seconds;
    // (By size: the next LP has more columns than this one, so none when this one is over.)
    const bool by_size = out.columns <= o.lp_round_columns;
    if (!s.optimal || !s.solution || rounds >= o.lp_rounds || !(by_time || by_size)) return out;
    if (std::isfinite(best) && s.bound >= best * (1 - 1e-9)) return out;  // at the incumbent: it is optimal
    std::vector<double> k(md.nodes.size()), r(md.nodes.size());
    for (size_t i = 0; i < md.nodes.size(); ++i) k[i] = s.x[b.k[i]], r[i] = s.x[b.r[i]];
    const auto over = overfilled_gaps(md, limit, gaps, k, r);
    if (over.empty()) {
      out.status = "lp, every gap";  // the solution fits every gap: the bound of them all
      return out;
    }
    previous = gaps;
    for (size_t j = 0; j < over.size() && j < static_cast<size_t>(o.lp_gaps_per_round); ++j) {
      if (over[j].second < md.F) gaps.fwd.insert(over[j].second);
      else gaps.bwd.insert(over[j].second - md.F);
    }
    ++rounds;
  }
}

// The root node of the integer programme on `gaps` (run_milp's root_only) within `seconds`, with
// the incumbent `best` (units, kInf: none) as its cutoff: its bound (cost, proven; 0: none). Without
// CBC's preprocessing: with it, a root entered with its time nearly spent said "infeasible" (no
// plan below the incumbent: the incumbent optimal) on the 5005-node ResNet, where 150 s of the
// exact solver prove 6% less; its claims of infeasibility are not taken either (no bound then),
// nor a bound at the time limit.
double root_bound(const Model& md, double limit, const Gaps& gaps, double best, double seconds) {
  const Built b = build_lp(md, limit, {gaps.fwd.begin(), gaps.fwd.end()}, {gaps.bwd.begin(), gaps.bwd.end()}, {}, true);
  const double cutoff = std::isfinite(best) ? best * (1 - 1e-9) - 1e-12 : kInf;
  const Solved s = run_milp(b.lp, seconds, cutoff, kRelativeGap, nullptr, false, true);
  if (s.infeasible || s.time_limit || !(s.bound > -kInf)) return 0;
  return std::max(0.0, std::min(s.bound, best) * md.cost_unit);
}

}  // namespace

MirrorPlan views_follow(const Graph& fwd, MirrorPlan m) {
  if (m.empty()) m.assign(fwd.size(), 0);
  for (size_t v = 0; v < fwd.size(); ++v) {
    const Node& node = fwd.node(static_cast<int>(v));
    if (!node.is(OpKind::view)) continue;
    const Node& in = fwd.node(node.inputs[0].node);
    m[v] = in.is(OpKind::compute) || in.is(OpKind::view) ? m[node.inputs[0].node] : 0;
  }
  return m;
}

int budget_peak_gap(const TrainingGraph& tg, const Liveness& l) {
  const std::vector<int64_t> live = live_bytes_per_step(l, false, static_cast<int>(tg.graph.size()));
  const int at = static_cast<int>(std::max_element(live.begin(), live.end()) - live.begin());  // (the first peak step)
  if (at < tg.num_forward) return at;
  int k = 0;
  for (int id = tg.num_forward; id < at; ++id) k += tg.graph.node(id).role != NodeRole::recompute;
  return tg.num_forward + k;
}

ExactBudget solve_budget_exact(const Graph& forward, const TrainingGraph& keep_all, const ExactBudgetOptions& o,
                               const std::function<BudgetCheck(const MirrorPlan&)>& check) {
  const auto t0 = std::chrono::steady_clock::now();
  auto elapsed = [&] { return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count(); };
  const double unit = byte_unit(o.arena_limit);
  const Model md = build_model(forward, keep_all, unit, o.device, o.balance);
  const double limit = static_cast<double>(o.arena_limit) / unit;
  double best = o.incumbent_cost >= 0 ? o.incumbent_cost / md.cost_unit : kInf;
  ExactBudget out;
  out.bound_cost = 0;
  // Whether the bound proven reaches the incumbent (which is then optimal); what every return sets.
  auto at_incumbent = [&] { return std::isfinite(best) && out.bound_cost >= best * md.cost_unit * (1 - 1e-9); };
  auto done = [&] {
    out.proven = out.proven || at_incumbent();
    out.seconds = elapsed();
  };
  Gaps gaps = starting_gaps(md, o.max_gaps);
  if (!o.integer) {  // budget's fast solver: the LP's bound with its rounds (and the root's cuts)
    const bool root_first = o.root == ExactBudgetOptions::Root::first && o.lp_round_seconds > 0;
    if (root_first) out.root_bound_cost = root_bound(md, limit, gaps, best, std::max(0.05, o.lp_round_seconds - elapsed()));
    const LpBound lp = lp_bound(md, limit, gaps, best, o, elapsed);
    out.status = lp.status, out.solves = lp.solves + root_first;
    // Again on the gaps the rounds modelled, with the time left.
    if (root_first && lp.solves > 1 && lp.status != "optimal" && lp.status != "infeasible" && o.lp_round_seconds - elapsed() > 0.05) {
      out.root_bound_cost = std::max(out.root_bound_cost, root_bound(md, limit, gaps, best, o.lp_round_seconds - elapsed()));
      ++out.solves;
    }
    out.bound_cost = std::max(lp.bound_cost, out.root_bound_cost);
    if (root_first && out.status != "optimal") out.status += ", root cuts";
    out.columns = lp.columns, out.rows = lp.rows, out.gaps = static_cast<int>(gaps.fwd.size() + gaps.bwd.size());
    done();
    return out;
  }
  if (o.lp_rounds > 0) {
    // The LP's rounds first (from lp_max_gaps' start: the fast solver's): their bound, and the
    // gaps they found binding start the programme.
    Gaps lp_gaps = starting_gaps(md, o.lp_max_gaps > 0 ? o.lp_max_gaps : o.max_gaps);
    const LpBound lp = lp_bound(md, limit, lp_gaps, best, o, elapsed);
    gaps.fwd.insert(lp_gaps.fwd.begin(), lp_gaps.fwd.end());
    gaps.bwd.insert(lp_gaps.bwd.begin(), lp_gaps.bwd.end());
    out.bound_cost = lp.bound_cost;
    out.solves = lp.solves;
    // Then the root's cuts on the gaps they modelled (the programme's own solves would reach them
    // too, but on ResNet-152 at 0.5x those did not finish a root in 5 s: 94.7 G proven against
    // the root's 113 G in 0.6 s), so the bound is at least the fast solver's.
    if (o.root == ExactBudgetOptions::Root::after_rounds && lp.status != "optimal" && lp.status != "infeasible" &&
        o.seconds - elapsed() > 0.05) {
      out.root_bound_cost = root_bound(md, limit, lp_gaps, best, std::max(0.05, std::min(o.seconds - elapsed(), std::max(1.0, o.seconds / 4))));
      out.bound_cost = std::max(out.bound_cost, out.root_bound_cost);
      ++out.solves;
    }
    if (at_incumbent()) {
      out.status = "optimal";  // the incumbent is proven optimal
      out.gaps = static_cast<int>(gaps.fwd.size() + gaps.bwd.size());
      done();
      return out;
    }
  }
  std::vector<std::vector<signed char>> cuts;
  // Two kinds of solve alternate. Honest ones model the true limit: their bounds are proven, and
  // a solution of theirs that fits is optimal. The model misses what the exact plan adds (values
  // live only during a node, recomputed values read only by recomputation, packing), so their
  // solutions tend to overshoot a little; primal ones model the limit lowered by the overshoot
  // seen so far, to find plans that fit (and so a lower cutoff for the honest ones).
  double tighten = 0;                              // units
  double per_solve = std::max(1.0, o.seconds / 4);  // seconds one solve may take
  bool honest = true;
  for (;;) {
    if (o.progress && out.solves > 0) o.progress(out.solves, elapsed(), best * md.cost_unit, out.bound_cost);
    const double left = o.seconds - elapsed();
    if (left <= 0) {
      out.status = "time limit";
      break;
    }
    const Built b = build_lp(md, honest ? limit : limit - tighten, {gaps.fwd.begin(), gaps.fwd.end()},
                             {gaps.bwd.begin(), gaps.bwd.end()}, cuts, true);
    out.columns = static_cast<int>(b.lp.lo.size()), out.rows = static_cast<int>(b.lp.rows.size());
    out.binaries = static_cast<int>(md.nodes.size());
    out.gaps = static_cast<int>(gaps.fwd.size() + gaps.bwd.size());
    // Solutions must beat the incumbent (by more than rounding).
    const double cutoff = std::isfinite(best) ? best * (1 - 1e-9) - 1e-12 : kInf;
    const Solved s = run_milp(b.lp, std::min(left, per_solve), cutoff, kRelativeGap);
    ++out.solves;
    if (honest) {
      if (s.infeasible) {
        // Nothing below the incumbent: it is optimal (or, without one, nothing fits).
        out.bound_cost = std::isfinite(best) ? best * md.cost_unit : kInf;
        out.status = std::isfinite(best) ? "optimal" : "infeasible";
        break;
      }
      out.bound_cost = std::max(out.bound_cost, std::min(s.bound, best) * md.cost_unit);
    }
    if (!s.solution) {
      if (honest) {
        // No solution in its share of the time: once more with all the time left, else stop.
        if (s.time_limit && o.seconds - elapsed() > per_solve) {
          per_solve = o.seconds - elapsed();
          continue;
        }
        out.status = "time limit";
        break;
      }
      honest = true;  // nothing fits the lowered limit below the cutoff
      continue;
    }
    std::vector<char> kept(md.nodes.size());
    MirrorPlan m(forward.size(), 0);
    for (size_t i = 0; i < md.nodes.size(); ++i) {
      kept[i] = s.x[b.k[i]] > 0.5;
      if (md.nodes[i] < md.mirrorable) m[md.nodes[i]] = kept[i] ? 0 : 1;
    }
    m = views_follow(forward, std::move(m));
    const BudgetCheck chk = check(m);
    if (chk.fits) {
      if (chk.recompute_cost / md.cost_unit < best) {
        best = chk.recompute_cost / md.cost_unit;
        out.plan = m, out.plan_cost = chk.recompute_cost;
      }
      if (honest && s.optimal) {  // the programme's optimum (within CBC's relative gap) fits
        out.status = "optimal";
        break;
      }
      honest = true;
      continue;
    }
    // Does not fit. First the gaps the programme's own accounting of this solution overfills
    // (overfilled_gaps, over every gap: the LP rounds' test), the most overfilled first: a
    // solution of the few gaps modelled overfilled 1470 of them on the 5005-node ResNet (HiGHS in a
    // scratch build; CBC found none in a minute there), and
    // adding only the gap where its plan peaked moved the peak to the next gap, solve after
    // solve. Then model the gap where the plan peaks or, when that one is modelled already (by
    // now), cut the plan off (valid: it does not fit).
    {
      std::vector<double> kept(md.nodes.size()), rec(md.nodes.size());
      for (size_t i = 0; i < md.nodes.size(); ++i) kept[i] = s.x[b.k[i]], rec[i] = s.x[b.r[i]];
      const auto over = overfilled_gaps(md, limit, gaps, kept, rec);
      for (size_t j = 0; j < over.size() && j < static_cast<size_t>(kGapsPerSolution); ++j) {
        if (over[j].second < md.F) gaps.fwd.insert(over[j].second);
        else gaps.bwd.insert(over[j].second - md.F);
      }
    }
    bool added = false;
    if (chk.peak_gap >= 0 && chk.peak_gap < md.F) {
      added = gaps.fwd.insert(chk.peak_gap).second;
    } else if (chk.peak_gap >= md.F) {
      const int g = std::min(md.M - 1, chk.peak_gap - md.F);
      added = gaps.bwd.insert(g).second;
      if (g + 1 < md.M) added |= gaps.bwd.insert(g + 1).second;
    }
    if (!added) {
      // The cut names only the nodes whose choice shapes this plan's training graph: those
      // backward reads, and those a node it recomputes reads. Any plan that agrees on them has the
      // same recomputed nodes and the same graph, so it does not fit either.
      std::vector<char> recomputed(md.nodes.size(), 0);
      for (int v : chk.recomputed)
        if (v < md.F && md.col[v] >= 0) recomputed[md.col[v]] = 1;
      std::vector<signed char> cut(md.nodes.size(), -1);
      for (size_t i = 0; i < md.nodes.size(); ++i) {
        bool named = md.backward_reads[i];
        for (int u : md.consumers[i]) named = named || recomputed[u];
        if (named) cut[i] = kept[i] ? 1 : 0;
      }
      cuts.push_back(std::move(cut)), ++out.cuts;
    }
    tighten += std::max(1.0, static_cast<double>(chk.excess_bytes) / unit);
    honest = !honest;
  }
  done();
  return out;
}

std::string budget_programme_rejects(const Graph& forward, const TrainingGraph& keep_all, int64_t arena_limit, const MirrorPlan& m,
                                     double* cost, double balance) {
  const double unit = byte_unit(arena_limit);
  const Model md = build_model(forward, keep_all, unit, nullptr, balance);
  const double limit = static_cast<double>(arena_limit) / unit;
  std::vector<int> fg, bg;
  for (int t = 0; t < md.F; ++t) fg.push_back(t);
  for (int k = 0; k < md.M; ++k) bg.push_back(k);
  auto feasible = [&](const std::vector<int>& f, const std::vector<int>& b) {
    Built bt = build_lp(md, limit, f, b, {}, true);
    for (size_t i = 0; i < md.nodes.size(); ++i) {
      const int v = md.nodes[i];
      const double kept = v < md.mirrorable && m[v] ? 0 : 1;
      bt.lp.lo[bt.k[i]] = bt.lp.hi[bt.k[i]] = kept;
    }
    const Solved sv = run_milp(bt.lp, 10, kInf, kRelativeGap);
    if (!sv.infeasible && !sv.optimal) throw Error("budget_programme_rejects: CBC reached no verdict in 10 s");
    if (cost && !sv.infeasible) *cost = sv.objective * md.cost_unit;
    return !sv.infeasible;
  };
  if (feasible(fg, bg)) return "";
  if (!feasible({}, {})) return "rejected by the structure rows";
  std::string out = "rejected by";
  for (size_t t = 0; t < fg.size(); ++t)
    if (!feasible({fg[t]}, {})) out += " fwd gap " + std::to_string(fg[t]);
  for (size_t k = 0; k < bg.size(); ++k)
    if (!feasible({}, {bg[k]})) out += " bwd gap " + std::to_string(bg[k]) + " (node " + keep_all.graph.node(md.F + bg[k]).name + ")";
  return out;
}

}  // namespace mnemo
