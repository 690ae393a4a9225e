// Memory reports of a training graph under an allocation mode, with the accounting names of
// ARCHITECTURE.md (shared by reports, CSV columns, plots and docs):
//   feature_map_bytes  arena bytes for activations and their gradients
//   param_bytes, param_grad_bytes, optimizer_bytes, workspace_bytes, input_bytes
//   total_bytes        all of the above: what one training step needs
//   max_live_bytes     the largest sum of simultaneously live transient entries (lower bound)
//   fragmentation      (feature + workspace arena - max_live) / (feature + workspace arena)
//   recompute_flops    extra forward FLOPs of the mirror plan; overhead = recompute / step FLOPs
// The JSON form (to_json) is stable: documented in docs/MEMORY.md and read by tools and plots.
#pragma once
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
  double planning_seconds = 0;
  int64_t nodes = 0, recompute_nodes = 0, buffers = 0, inplace = 0;
  double step_flops = 0, recompute_flops = 0;
};

struct PlannedStep {
  MemoryPlan plan;
  MemoryReport report;
};

// Plans the training graph's memory (parameter gradients in their own region) and reports it.
// `optimizer_state_per_param`: optimiser tensors per trainable parameter (SGD with momentum: 1).
// `device`: the backend the plan is for (null: the CPU).
PlannedStep plan_training_step(const TrainingGraph& tg, AllocMode mode, int optimizer_state_per_param,
                               const Device* device = nullptr);

nlohmann::json to_json(const MemoryReport& r);
std::string format_bytes(int64_t bytes);  // "12.3 MiB"

}  // namespace mnemo
