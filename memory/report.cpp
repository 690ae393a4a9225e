// Training-step memory plans and their reports.
#include "memory/report.h"

#include "autograd/allreduce.h"

#include <algorithm>
#include <cstdio>

namespace mnemo {

PlannedStep plan_training_step(const TrainingGraph& tg, AllocMode mode, StepPlanOptions options) {
  const Device* device = options.device;
  const double balance = options.balance;
  const Graph& g = tg.graph;
  // Packed after the feature maps: the parameter gradients (with data parallelism also the
  // all-reduce bucket buffers, docs/PARALLEL.md), and with the optimiser inside the step
  // the step's status word (the int32 entries its updates read and write), so feature_map_bytes
  // stays the activation quantity. (The BatchNorm statistics the assign nodes read stay feature maps.)
  std::vector<EntryRef> grads;
  for (const ParamGrad& pg : tg.grads) grads.push_back(pg.grad);
  for (int id = 0; id < static_cast<int>(g.size()); ++id) {
    const Node& n = g.node(id);
    if (is_bucket_start(n)) grads.push_back({id, 0});  // data parallelism's bucket buffers
    if (!n.op->traits.updates_state) continue;
    for (const EntryRef& e : n.inputs)
      if (g.node(e.node).is(OpKind::compute) && g.type(e).dtype == DType::i32) grads.push_back(e);
    for (size_t j = 0; j < n.outputs.size(); ++j)
      if (!aliased_input(n, j)) grads.push_back({id, static_cast<int>(j)});
  }
  PlanStats st;
  PlannedStep out;
  Liveness liveness;
  out.plan = plan_memory(g, mode, &st, grads, device, options.prune_above, std::move(options.kernels), options.exact_seconds,
                         options.enough, options.keep_liveness ? &liveness : nullptr);
  if (options.keep_liveness) out.liveness = std::make_shared<const Liveness>(std::move(liveness));
  MemoryReport& r = out.report;
  r.mode = alloc_mode_name(mode);
  r.nodes = static_cast<int64_t>(g.size());
  r.planning_seconds = st.planning_seconds;
  r.balance = balance;
  std::vector<bool> is_state(g.size(), false);  // (a flag per node: a search over the list per param was quadratic)
  for (int v : tg.optimizer_state) is_state.at(static_cast<size_t>(v)) = true;
  for (size_t v = 0; v < g.size(); ++v) {
    const Node& n = g.node(static_cast<int>(v));
    if (n.is(OpKind::param)) {
      const bool state = is_state[v];
      (state ? r.optimizer_bytes : r.param_bytes) += static_cast<int64_t>(n.outputs[0].bytes());
    } else if (n.is(OpKind::input)) {
      r.input_bytes += static_cast<int64_t>(n.outputs[0].bytes());
    } else if (n.is(OpKind::compute) && n.op->cost) {
      const Cost c = node_cost(g, static_cast<int>(v));
      const double t = c.roofline(balance);
      r.step_flops += c.flops, r.step_cost += t;
      if (n.role == NodeRole::recompute) r.recompute_flops += c.flops, r.recompute_cost += t, ++r.recompute_nodes;
    }
  }
  if (st.pruned) {  // no arena: its live bytes (a lower bound of it) and its FLOPs
    r.pruned = true;
    r.arena_bytes = -1;
    r.max_live_bytes = st.max_live_bytes;
    return out;
  }
  r.feature_map_bytes = st.feature_map_bytes;
  r.workspace_bytes = st.workspace_bytes;
  r.param_grad_bytes = st.param_grad_bytes;
  r.arena_bytes = st.arena_bytes;
  r.max_live_bytes = st.max_live_bytes;
  r.fragmentation = st.fragmentation;
  r.arena_bound_bytes = st.arena_bound_bytes;
  r.placement = st.placement;
  r.placement_seconds = st.placement_seconds;
  r.buffers = st.buffers;
  r.inplace = st.inplace;
  r.total_bytes = r.arena_bytes + r.param_bytes + r.optimizer_bytes + r.input_bytes;
  return out;
}

namespace {
double overhead(double part, double whole) { return whole > part ? part / (whole - part) : 0.0; }
}  // namespace

double recompute_overhead(const MemoryReport& r) { return overhead(r.recompute_flops, r.step_flops); }
double recompute_cost_overhead(const MemoryReport& r) { return overhead(r.recompute_cost, r.step_cost); }

nlohmann::json to_json(const MemoryReport& r) {
  return {{"mode", r.mode},
          {"feature_map_bytes", r.feature_map_bytes},
          {"param_bytes", r.param_bytes},
          {"param_grad_bytes", r.param_grad_bytes},
          {"optimizer_bytes", r.optimizer_bytes},
          {"workspace_bytes", r.workspace_bytes},
          {"input_bytes", r.input_bytes},
          {"total_bytes", r.total_bytes},
          {"max_live_bytes", r.max_live_bytes},
          {"arena_bytes", r.arena_bytes},
          {"fragmentation", r.fragmentation},
          {"arena_bound_bytes", r.arena_bound_bytes},
          {"placement", r.placement},
          {"placement_seconds", r.placement_seconds},
          {"planning_seconds", r.planning_seconds},
          {"nodes", r.nodes},
          {"recompute_nodes", r.recompute_nodes},
          {"buffers", r.buffers},
          {"inplace", r.inplace},
          {"step_flops", r.step_flops},
          {"recompute_flops", r.recompute_flops},
          {"recompute_overhead", recompute_overhead(r)},
          {"balance", r.balance},
          {"step_cost", r.step_cost},
          {"recompute_cost", r.recompute_cost},
          {"recompute_cost_overhead", recompute_cost_overhead(r)}};
}

std::string format_bytes(int64_t b) {
  char buf[32];
  if (b < 1024) std::snprintf(buf, sizeof buf, "%lld B", static_cast<long long>(b));
  else if (b < (1 << 20)) std::snprintf(buf, sizeof buf, "%.1f KiB", b / 1024.0);
  else if (b < (int64_t{1} << 30)) std::snprintf(buf, sizeof buf, "%.1f MiB", b / 1048576.0);
  else std::snprintf(buf, sizeof buf, "%.2f GiB", b / 1073741824.0);
  return buf;
}

}  // namespace mnemo
