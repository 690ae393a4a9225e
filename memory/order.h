// The schedule order (OLLA's lifetime half, docs/MEMORY.md "Schedule order"): a pass between the
// gradient pass (with the optimiser update) and memory planning that reorders the nodes after the
// forward pass to lower the peak of live bytes, keeping each op's semantics:
//   - every node after the nodes it reads (recomputed nodes still before their consumers);
//   - memory updated in place (an optimiser update of a parameter and its velocity, a state
//     update's assign) read by the same nodes before the update and by the same after it, and
//     updates of one memory in their order (so the status word chains the same updates);
//   - the forward nodes [0, num_forward) stay where they are (mirror plans and the cut and
//     checkpoint searches name them by id).
// Any such order computes the same values with the same summations (each gradient sum is a chain
// of `add`s, a data dependency), so losses and gradients stay bitwise equal (tested).
//   default       the gradient pass's order (memory/../autograd/gradient.h), unchanged
//   greedy        list scheduling: of the nodes ready to run, the one that adds the fewest bytes
//                 (outputs minus what its reads free), the earliest on ties; kept only when its
//                 exact peak is below the default's
//   optimal       a mixed-integer programme over node positions (OLLA's formulation, CBC, with a
//                 time limit): the least peak of any order; the greedy order is its start, and the
//                 programme's bound (in-place relaxed, so a lower bound of the exact peak) is
//                 reported with the gap
//   updates-last  every optimiser update after the whole backward pass (PyTorch's
//                 `optimizer.step()` order): for comparisons, never chosen by a planner
// Requires: a TrainingGraph (autograd/update.h). Provides: the reordered graph and an OrderReport.
#pragma once
#include <string>
#include <vector>

#include "autograd/gradient.h"
#include "core/memory_plan.h"

namespace mnemo {

enum class ScheduleOrder { default_order, greedy, optimal, updates_last };
ScheduleOrder parse_schedule_order(const std::string& name);  // throws listing the valid names
const char* schedule_order_name(ScheduleOrder o);

struct OrderReport {
  std::string order = "default";  // asked
  std::string chosen = "default"; // the order the step runs: default, greedy, optimal or updates-last
  int64_t default_peak = 0;       // max live bytes (workspace included) of the default order
  int64_t peak = 0;               // ... of the chosen order
  int64_t bound = -1;             // optimal: no order's peak is below it (proven); -1: none
  std::string status;             // optimal: what the programme reached
  int moved = 0;                  // nodes whose position changed
  int region = 0;                 // nodes after the forward pass (what may move)
  double seconds = 0;
};

// Reorders `tg`'s nodes after the forward pass. `kernels`: every node's prepared kernel (permuted
// with the nodes). `allow_inplace`: the allocation mode's (the peaks are those of
// memory/liveness.h). `seconds`: optimal's time limit.
OrderReport reorder_step(TrainingGraph& tg, std::vector<PreparedKernel>& kernels, ScheduleOrder order, bool allow_inplace,
                         double seconds = 10);

// The nodes that must run before each node after the forward pass (data and in-place
// dependencies, above), as ids of `tg.graph`; empty lists for forward nodes. Exposed for tests.
std::vector<std::vector<int>> schedule_dependencies(const TrainingGraph& tg);

// `tg` with its nodes in `order` (order[k]: the old id of the k-th node; a permutation keeping
// every dependency), the kernels likewise. Exposed for tests.
void apply_order(TrainingGraph& tg, std::vector<PreparedKernel>& kernels, const std::vector<int>& order);

}  // namespace mnemo
