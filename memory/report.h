// Memory reports of a training graph under an allocation mode, with the accounting names of
// docs/MEMORY.md (shared by reports, CSV columns, plots and docs):
//   feature_map_bytes  arena bytes for activations and their gradients (packed alone: the
//                      papers' feature-map quantity)
//   param_grad_bytes   the planned peak of parameter-gradient buffers (in the arena: each dies at
//                      its optimiser update; without updates, e.g. `mnemo grad`, all live at the end)
//   workspace_bytes    arena bytes the op workspaces add
//   arena_bytes        the one allocation of the step: feature maps, gradients and workspace packed
//                      together (so at most their sum)
//   param_bytes, optimizer_bytes, input_bytes  parameters (and running statistics), optimiser
//                      state (velocities), bound inputs
//   total_bytes        arena + params + optimizer + inputs: what one training step needs
//   max_live_bytes     the largest sum of simultaneously live arena buffers (lower bound of the arena)
//   fragmentation      (arena - max_live) / arena
//   arena_bound_bytes  no packing of the step's buffers has a smaller arena (proven: max_live, or
//                      the exact placement's bound, memory/placement.h); `placement` says how far
//                      the packing got ("at the live-bytes bound", "optimal", "time limit", ...)
//   recompute_flops    extra forward FLOPs of the mirror plan; overhead = recompute / step FLOPs
//   recompute_cost     the same nodes' roofline cost (Cost::roofline at `balance` FLOPs per byte:
//                      a memory-bound batch norm or ReLU costs its bytes, not its few FLOPs), in
//                      FLOP-equivalents; step_cost the whole step's. budget=SIZE minimises it.
// The JSON form (to_json) is stable: documented in docs/MEMORY.md and read by tools and plots.
#pragma once
#include <memory>
#include <nlohmann/json.hpp>
#include <string>

#include "autograd/gradient.h"
#include "memory/planner.h"

namespace mnemo {

struct MemoryReport {
  std::string mode;
  int64_t feature_map_bytes = 0, param_bytes = 0, param_grad_bytes = 0, optimizer_bytes = 0;
  int64_t workspace_bytes = 0, input_bytes = 0, total_bytes = 0, max_live_bytes = 0, arena_bytes = 0;
  double fragmentation = 0;
  int64_t arena_bound_bytes = 0;
  std::string placement;
  double placement_seconds = 0;
  double planning_seconds = 0;
  int64_t nodes = 0, recompute_nodes = 0, buffers = 0, inplace = 0;
  double step_flops = 0, recompute_flops = 0;
  double balance = kDefaultBalance, step_cost = 0, recompute_cost = 0;
  bool pruned = false;  // planned only up to the live-bytes bound (see plan_training_step)
};

struct PlannedStep {
  MemoryPlan plan;
  MemoryReport report;
  std::shared_ptr<const Liveness> liveness;  // with StepPlanOptions::keep_liveness: the plan's (else null)
};

// How plan_training_step plans: `device`, the backend the plan is for (null: the CPU);
// `prune_above` >= 0: see plan_memory (a pruned step has report.pruned set, arena_bytes -1 and
// max_live_bytes, a lower bound of its arena, filled in); `kernels`, `exact_seconds`: see
// plan_memory; `balance`: the cost estimates' FLOPs per byte.
struct StepPlanOptions {
  const Device* device = nullptr;
  int64_t prune_above = -1;
  std::vector<PreparedKernel> kernels = {};
  double exact_seconds = -1;
  int64_t enough = -1;  // see plan_memory
  double balance = kDefaultBalance;
  bool keep_liveness = false;  // PlannedStep::liveness
};

// Plans the training graph's memory and reports it.
PlannedStep plan_training_step(const TrainingGraph& tg, AllocMode mode, StepPlanOptions options = {});

// recompute / (step - recompute): the plan's extra work over the plain step (0 when nothing else
// runs), in FLOPs and in roofline cost.
double recompute_overhead(const MemoryReport& r);
double recompute_cost_overhead(const MemoryReport& r);

nlohmann::json to_json(const MemoryReport& r);
std::string format_bytes(int64_t bytes);  // "12.3 MiB"

}  // namespace mnemo
