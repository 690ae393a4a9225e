// budget=SIZE's fill members (docs/MEMORY.md "The family"): a member of the family (a fill start)
// with its dropped nodes kept back, in one of two orders, as far as a live-bytes level allows,
// then planned exactly and repaired when over the level; and the keep-back orders themselves,
// which the keep-back paths share. Used by memory/budget_planner.cpp. Internal to memory/.
#pragma once
#include <array>
#include <cstdint>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <unordered_map>
#include <utility>
#include <vector>

#include "memory/liveness.h"
#include "memory/mirror_search.h"

namespace mnemo {

// The order in which dropped nodes are kept back (the keep-back paths, the fills): ascending keys
// put the most recompute cost per output byte first; `also_saved`: the recompute cost keeping the
// node back saves besides its own (chain_charges; 0: the first order).
double keep_back_key(const Graph& fwd, int v, double balance, double also_saved = 0);

// What keeping each dropped forward node of `r`'s plan back saves besides its own recompute: a
// recomputed copy that only recomputed copies read (an LSTM's gate products, read only by the
// gates' sum, read only by its split; a block's sum, recomputed only for its ReLU) is recomputed
// only for them, so its cost (and what was charged to it) is charged to those readers, 1/k to
// each of k, as the knapsack bound charges held inputs. Keeping all its readers back saves it.
// Per forward node: what was charged to its first recomputed copy (0 when it has none).
std::vector<double> chain_charges(const PlanContext& ctx, const MirrorResult& r);

// Per forward node: the id of its first recomputed copy in `r`'s training graph, -1 when none.
std::vector<int> first_copies(const MirrorResult& r, size_t forward_nodes);

// Where `r`'s exact plan peaks (the step of most live bytes; forward nodes keep their ids in the
// training graph), and its liveness: what the repairs let go of (the fills' and budget's search).
// `r` is a light result or a probe (PlanContext::evaluate_in: its liveness kept; else an error).
struct ExactPeak {
  std::shared_ptr<const Liveness> liveness;
  int step = 0;
  // The bytes of forward node v's outputs live at the peak (0: none).
  int64_t bytes_of(int v) const;
};
ExactPeak exact_peak(const MirrorResult& r);

// Where a fill starts (a member as it is, or with its cheap nodes dropped too): the plan, the live
// bytes at each step of its schedule, and its dropped nodes a fill may keep back. Prepared once
// and filled up to several levels.
struct FillStart {
  struct Candidate {
    int node;
    int to;                                      // the step of its first recomputed copy
    std::vector<std::pair<int, int64_t>> adds;   // (from step, bytes) per output, up to `to`
  };
  MirrorPlan plan;
  int64_t live_bytes = 0;
  std::vector<int64_t> live;
  // The candidates in the two keep-back orders: by their own recompute cost per byte, and with
  // what keeping them back also saves (chain_charges); each order gives a fill.
  std::array<std::vector<Candidate>, 2> candidates;
};
FillStart prepare_fill(const PlanContext& ctx, MirrorPlan plan);
// ... from `evaluated`, the plan's result already planned (light or full).
FillStart prepare_fill(const PlanContext& ctx, MirrorPlan plan, const MirrorResult& evaluated);

struct Fill {
  MirrorPlan plan;
  MemoryReport report;
  bool repaired = false;
};

// A plan as a key (a byte per node when every count is below 256, else its ints).
std::string plan_key(const MirrorPlan& m);

// What was learnt of plans, by plan (plan_key), shared by threads, with a count of the lookups
// that found one; at most `max_plans` plans (then it learns no more). The planners' memos: the
// fills' (FillMemo), the family's reports (BudgetMemo) and the local search's probes
// (memory/budget_search.cpp). What each keeps must be a function of the plan alone (one context).
template <class V>
class PlanMemo {
 public:
  explicit PlanMemo(size_t max_plans = size_t{1} << 13) : max_plans_(max_plans) {}
  std::optional<V> find(const MirrorPlan& m) {
    const std::string k = plan_key(m);
    std::lock_guard<std::mutex> lock(mu_);
    const auto it = seen_.find(k);
    if (it == seen_.end()) return std::nullopt;
    ++hits_;
    return it->second;
  }
  void add(const MirrorPlan& m, V v) {
    std::string k = plan_key(m);
    std::lock_guard<std::mutex> lock(mu_);
    if (seen_.size() < max_plans_) seen_.emplace(std::move(k), std::move(v));
  }
  int hits() {
    std::lock_guard<std::mutex> lock(mu_);
    return hits_;
  }

 private:
  const size_t max_plans_;
  std::mutex mu_;
  std::unordered_map<std::string, V> seen_;
  int hits_ = 0;
};

// What the fills learnt of a plan they evaluated: its light report and the bytes of each forward
// node live at its exact peak (what a repair lets go of). The fills of one family, and of one
// search, often come to a plan met before (a fill at one level is the fill at the next, a repair
// the same as another job's: on ResNet-56 at `sublinear`'s total 254 of the family's 598 plans
// built; docs/BENCHMARKS.md "The fills' plans remembered"), so a fill meeting a plan again does
// not build it, and decides the same.
struct FillLearnt {
  MemoryReport report;
  std::vector<std::pair<int, int64_t>> peak_bytes;  // (forward node, bytes of its outputs live at the peak > 0), by node
  int64_t bytes_at_peak(int v) const;
};
using FillMemo = PlanMemo<FillLearnt>;

// MemoryMode::budget_memo: the family's light reports (its members' and keep-back paths') and its
// fills' plans, for every SIZE of one graph and mode.
struct BudgetMemo {
  FillMemo fills;
  PlanMemo<MemoryReport> reports;
};
// The keeps of a fill of `start` up to `cap` in candidate order `order` (0 or 1): the estimate,
// cheap. Equal keeps give equal fills.
std::vector<int> fill_keeps(const FillStart& start, int order, int64_t cap);
// `keeps` (fill_keeps') kept back from `start`, planned exactly and repaired; nullopt when nothing
// could be kept.
// `memo` (optional): the plans met before are not built again.
std::optional<Fill> fill_to(const PlanContext& ctx, const FillStart& start, std::vector<int> keeps, int64_t cap, FillMemo* memo = nullptr);

}  // namespace mnemo
