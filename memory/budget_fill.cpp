// budget=SIZE's fill members and keep-back orders (memory/budget_fill.h; docs/MEMORY.md "The
// family").
#include "memory/budget_fill.h"

#include <algorithm>
#include <cstring>

#include "memory/budget_exact.h"
#include "memory/liveness.h"
#include "memory/placement_util.h"
#include "memory/step_load.h"

namespace mnemo {

std::vector<int> first_copies(const MirrorResult& r, size_t forward_nodes) {
  const Graph& g = r.training.graph;
  std::vector<int> first(forward_nodes, -1);
  for (int id = r.training.num_forward; id < static_cast<int>(g.size()); ++id)
    if (const Node& n = g.node(id);
        n.role == NodeRole::recompute && n.source >= 0 && n.source < static_cast<int>(forward_nodes) && first[static_cast<size_t>(n.source)] < 0)
      first[static_cast<size_t>(n.source)] = id;
  return first;
}

namespace {

// The liveness `r`'s evaluation kept: every result the fills and the repairs analyse is a light
// result or a probe (PlanContext::evaluate_in), which keep it.
const std::shared_ptr<const Liveness>& kept_liveness(const MirrorResult& r) {
  MNEMO_ASSERT(r.planned.liveness) << "a plan evaluated in full has no liveness kept: evaluate it light (prune_above 0) or as a probe";
  return r.planned.liveness;
}

}  // namespace

ExactPeak exact_peak(const MirrorResult& r) {
  ExactPeak p{kept_liveness(r)};
  p.step = placing::heaviest_step(live_bytes_per_step(*p.liveness, true, static_cast<int>(r.training.graph.size())));
  return p;
}

int64_t ExactPeak::bytes_of(int v) const {
  int64_t bytes = 0;
  for (int b : liveness->entry_buffer[static_cast<size_t>(v)])
    if (b >= 0 && placing::live_at(liveness->buffers[static_cast<size_t>(b)], step)) bytes += placing::size_of(liveness->buffers[static_cast<size_t>(b)]);
  return bytes;
}

// The order in which dropped nodes are kept back (the keep-back paths, the fills): ascending keys
// put the most recompute cost per output byte first.
double keep_back_key(const Graph& fwd, int v, double balance, double also_saved) {
  double bytes = 0;
  for (const TensorType& t : fwd.node(v).outputs) bytes += static_cast<double>(t.bytes());
  return -(recompute_cost(fwd, v).roofline(balance) + also_saved) / std::max(1.0, bytes);
}

// What keeping each dropped forward node of `r`'s plan back saves besides its own recompute: a
// recomputed copy that only recomputed copies read (an LSTM's gate products, read only by the
// gates' sum, read only by its split; a block's sum, recomputed only for its ReLU) is recomputed
// only for them, so its cost (and what was charged to it) is charged to those readers, 1/k to
// each of k, as the knapsack bound charges held inputs. Keeping all its readers back saves it.
// Per forward node: what was charged to its first recomputed copy (0 when it has none).
std::vector<double> chain_charges(const PlanContext& ctx, const MirrorResult& r) {
  const Graph& g = r.training.graph;
  const Graph& fwd = ctx.fwd;
  const int steps = static_cast<int>(g.size());
  std::vector<std::vector<int>> readers(static_cast<size_t>(steps));
  for (int id = r.training.num_forward; id < steps; ++id)
    for (const EntryRef& in : g.node(id).inputs)
      if (in.node >= r.training.num_forward && g.node(in.node).role == NodeRole::recompute) {
        auto& rs = readers[static_cast<size_t>(in.node)];
        if (rs.empty() || rs.back() != id) rs.push_back(id);
      }
  // Charges flow from a copy to its readers, which come later in the schedule: each copy's
  // charge is complete when the loop reaches it.
  std::vector<double> charged(static_cast<size_t>(steps), 0.0);
  for (int id = r.training.num_forward; id < steps; ++id) {
    const Node& n = g.node(id);
    if (n.role != NodeRole::recompute) continue;
    const auto& rs = readers[static_cast<size_t>(id)];
    if (rs.empty() || !std::all_of(rs.begin(), rs.end(), [&](int w) { return g.node(w).role == NodeRole::recompute; })) continue;
    const double share = (recompute_cost(fwd, n.source).roofline(ctx.mode.balance) + charged[static_cast<size_t>(id)]) /
                         static_cast<double>(rs.size());
    for (int w : rs) charged[static_cast<size_t>(w)] += share;
  }
  const std::vector<int> first = first_copies(r, fwd.size());
  std::vector<double> out(fwd.size(), 0.0);
  for (size_t v = 0; v < fwd.size(); ++v)
    if (first[v] >= 0) out[v] = charged[static_cast<size_t>(first[v])];
  return out;
}

// A kept node adds its output bytes from where its forward buffer died (from its forward step when
// a reader took that buffer over in place: the reader then needs a buffer of its own) to where
// backward first recomputes it, and none of the recomputation it saves is subtracted: an estimate
// from above but for what a broken in-place chain or a multi-output node adds beside it, so
// fill_to plans the result exactly.
FillStart prepare_fill(const PlanContext& ctx, MirrorPlan plan) {
  const MirrorResult r = ctx.evaluate(plan, 0);
  return prepare_fill(ctx, std::move(plan), r);
}
FillStart prepare_fill(const PlanContext& ctx, MirrorPlan plan, const MirrorResult& r) {
  FillStart f;
  const Graph& g = r.training.graph;
  const Graph& fwd = ctx.fwd;
  const Liveness& l = *kept_liveness(r);
  const int steps = static_cast<int>(g.size());
  f.live = live_bytes_per_step(l, true, steps);
  f.live_bytes = r.planned.report.max_live_bytes;
  const std::vector<int> first_copy = first_copies(r, fwd.size());
  std::vector<int> entries(l.buffers.size(), 0);  // entries stored in each buffer
  for (const auto& outs : l.entry_buffer)
    for (int b : outs)
      if (b >= 0) ++entries[b];
  const std::vector<double> charged = chain_charges(ctx, r);
  for (int with_saved = 0; with_saved < 2; ++with_saved) {
    std::vector<std::pair<double, int>> order;
    for (size_t v = 0; v < fwd.size(); ++v) {
      const Node& node = fwd.node(static_cast<int>(v));
      if (!plan[v] || !node.is(OpKind::compute) || first_copy[v] < 0) continue;
      const double also = with_saved ? charged[v] : 0.0;
      order.push_back({keep_back_key(fwd, static_cast<int>(v), ctx.mode.balance, also), static_cast<int>(v)});
    }
    std::sort(order.begin(), order.end());
    for (const auto& [key, v] : order) {
      FillStart::Candidate c{v, first_copy[v], {}};
      const Node& node = fwd.node(v);
      for (size_t j = 0; j < node.outputs.size(); ++j) {
        const int b = j < l.entry_buffer[v].size() ? l.entry_buffer[v][j] : -1;
        c.adds.push_back({b >= 0 && entries[b] == 1 ? l.buffers[b].end + 1 : v, align_up(node.outputs[j].bytes())});
      }
      f.candidates[with_saved].push_back(std::move(c));
    }
  }
  f.plan = std::move(plan);
  return f;
}

// `start` (live bytes within `cap`) filled up to `cap` (fill_keeps, then fill_to): its candidates
// kept back one by one while the estimated live bytes stay within `cap`, then planned exactly.
// When the exact live bytes overshoot, the plan is repaired (up to kFillRepairs times): keeps
// whose values are live at the exact peak are let go, the last kept first, until their bytes
// cover the overshoot. (The estimate
// misses where keeping a value moves its readers' recomputation later: on the paper's LSTM a kept
// gate pre-activation of step 0 then lives to the end of backward.) After that, the first half of
// the keeps, and so on. The plan, its light result and whether it is a repaired one; nullopt
// when nothing could be kept. (A second round from the filled plan found nothing more on
// ResNet-56 and ResNet-152, at twice the cost.)
constexpr int kFillRepairs = 2;

// The keeps of a fill of `start` up to `cap` in candidate order `order` (the estimate; cheap).
std::vector<int> fill_keeps(const FillStart& start, int order, int64_t cap) {
  StepLoad load(start.live);
  std::vector<int> keeps;
  for (const FillStart::Candidate& c : start.candidates[static_cast<size_t>(order)]) {
    bool fits = true;
    for (const auto& [from, bytes] : c.adds) fits = fits && (from >= c.to || load.max(from, c.to - 1) + bytes <= cap);
    if (!fits) continue;
    for (const auto& [from, bytes] : c.adds)
      if (from < c.to) load.add(from, c.to - 1, bytes);
    keeps.push_back(c.node);
  }
  return keeps;
}

std::string plan_key(const MirrorPlan& m) {
  const bool small = std::all_of(m.begin(), m.end(), [](int c) { return c >= 0 && c < 256; });
  std::string k(1 + (small ? m.size() : m.size() * sizeof(int)), small ? 'b' : 'i');  // (the first byte says which)
  if (small) std::transform(m.begin(), m.end(), k.begin() + 1, [](int c) { return static_cast<char>(c); });
  else std::memcpy(k.data() + 1, m.data(), k.size() - 1);
  return k;
}

int64_t FillLearnt::bytes_at_peak(int v) const {
  const auto it = std::lower_bound(peak_bytes.begin(), peak_bytes.end(), std::make_pair(v, int64_t{0}));
  return it != peak_bytes.end() && it->first == v ? it->second : 0;
}

std::shared_ptr<BudgetMemo> make_budget_memo() { return std::make_shared<BudgetMemo>(); }

namespace {

// What a fill reads of plan `m` (its light report, the bytes of each forward node live at its
// exact peak): from `memo` when it met `m` before, else `m` evaluated (light) and learnt.
// (Without a memo, the peak only when the plan is over `cap`: nothing else reads it.)
FillLearnt learn(const PlanContext& ctx, const MirrorPlan& m, int64_t cap, FillMemo* memo) {
  if (memo)
    if (std::optional<FillLearnt> l = memo->find(m)) return std::move(*l);
  const MirrorResult r = ctx.evaluate(m, 0);
  FillLearnt l{r.planned.report, {}};
  if (memo || l.report.max_live_bytes > cap) {
    const ExactPeak peak = exact_peak(r);  // (forward nodes keep their ids in the training graph)
    for (int v = 0; v < static_cast<int>(ctx.fwd.size()); ++v)
      if (const int64_t bytes = peak.bytes_of(v); bytes > 0) l.peak_bytes.push_back({v, bytes});
  }
  if (memo) memo->add(m, l);
  return l;
}

}  // namespace

// `keeps` (fill_keeps') kept back from `start`, planned exactly and repaired (above).
std::optional<Fill> fill_to(const PlanContext& ctx, const FillStart& start, std::vector<int> keeps, int64_t cap, FillMemo* memo) {
  if (keeps.empty()) return std::nullopt;
  auto plan_of = [&](size_t k) {  // the first k keeps
    MirrorPlan m = start.plan;
    for (size_t j = 0; j < k; ++j) m[keeps[j]] = 0;
    return ctx.apply(views_follow(ctx.fwd, std::move(m)));
  };
  for (int repair = 0;; ++repair) {
    MirrorPlan m = plan_of(keeps.size());
    const FillLearnt r = learn(ctx, m, cap, memo);
    if (r.report.max_live_bytes <= cap) return Fill{std::move(m), r.report, repair > 0};
    if (repair == kFillRepairs) break;
    // The keeps live at the exact peak, let go from the last kept (the least cost per byte) back
    // until their bytes cover the overshoot.
    int64_t over = r.report.max_live_bytes - cap;
    std::vector<char> drop(keeps.size(), 0);
    for (size_t j = keeps.size(); j-- > 0 && over > 0;)
      if (const int64_t bytes = r.bytes_at_peak(keeps[j]); bytes > 0) drop[j] = 1, over -= bytes;
    if (over > 0) break;  // the keeps live at the peak do not cover it: halving
    std::vector<int> rest;
    for (size_t j = 0; j < keeps.size(); ++j)
      if (!drop[j]) rest.push_back(keeps[j]);
    keeps = std::move(rest);
    if (keeps.empty()) return std::nullopt;
  }
  // (All of `keeps` was planned above and overshot.)
  for (size_t k = keeps.size() / 2; k > 0; k /= 2) {
    MirrorPlan m = plan_of(k);
    const MemoryReport rep = learn(ctx, m, cap, memo).report;
    if (rep.max_live_bytes <= cap) return Fill{std::move(m), rep, false};
  }
  return std::nullopt;
}

}  // namespace mnemo
