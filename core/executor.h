// The executor: binds one arena (allocated once, sized by the memory plan), the parameters and
// the step's inputs, then runs the graph's nodes in order (the schedule) on the CPU.
// After the last node it applies the graph's state updates (BatchNorm running statistics).
#pragma once
#include <memory>
#include <vector>

#include "core/graph.h"
#include "core/memory_plan.h"

namespace mnemo {

class Executor {
 public:
  Executor(const Graph& g, MemoryPlan plan);
  ~Executor();
  Executor(const Executor&) = delete;
  Executor& operator=(const Executor&) = delete;

  // Binds an input or param node (by name or id) to caller-owned memory of exactly its type.
  void bind(const std::string& name, TensorView v);
  void bind(int node, TensorView v);
  void run();

  TensorView entry(EntryRef e) const;  // valid after run() (or bind, for bound nodes)
  // Per-node wall time accumulated over runs while profiling is on (seconds, indexed by node).
  void set_profiling(bool on) { profile_.assign(on ? g_.size() : 0, 0.0); }
  const std::vector<double>& profile() const { return profile_; }
  const MemoryPlan& plan() const { return plan_; }
  int64_t allocated_bytes() const { return arena_bytes_; }  // what the executor allocated

 private:
  void prepare();
  const Graph& g_;
  MemoryPlan plan_;
  std::unique_ptr<char, void (*)(void*)> arena_;
  int64_t arena_bytes_ = 0;
  std::vector<std::vector<TensorView>> out_;  // [node][output]
  std::vector<std::vector<TensorView>> in_;   // [node][input], resolved by prepare()
  std::vector<int> compute_;                  // ids of nodes with kernels, in order
  bool prepared_ = false;
  std::vector<double> profile_;
};

}  // namespace mnemo
