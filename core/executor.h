// The executor: binds one arena (allocated once, sized by the memory plan), the parameters and
// the step's inputs, then runs the graph's nodes in order (the schedule) on the CPU, or on a
// Device (core/device.h): then the arena is one device allocation, bound views are device memory,
// kernels are the device's and run asynchronously (fetch() waits for them).
// After the last node it applies the graph's state updates (BatchNorm running statistics).
#pragma once
#include <map>
#include <memory>
#include <vector>

#include "core/graph.h"
#include "core/device.h"
#include "core/memory_plan.h"

namespace mnemo {

class Executor {
 public:
  // `device`: null runs on the CPU; else the plan must have been made for that device.
  Executor(const Graph& g, MemoryPlan plan, Device* device = nullptr);
  ~Executor();
  Executor(const Executor&) = delete;
  Executor& operator=(const Executor&) = delete;

  // Binds an input or param node (by name or id) to caller-owned memory of exactly its type.
  void bind(const std::string& name, TensorView v);
  void bind(int node, TensorView v);
  void run();

  TensorView entry(EntryRef e) const;  // valid after run() (or bind, for bound nodes); device memory on a device
  Tensor fetch(EntryRef e) const;      // a host copy of an entry (waits for the device)
  // Per-node wall time accumulated over runs while profiling is on (seconds, indexed by node).
  void set_profiling(bool on) { profile_.assign(on ? g_.size() : 0, 0.0); }
  const std::vector<double>& profile() const { return profile_; }
  const MemoryPlan& plan() const { return plan_; }
  // On a device that can capture (CUDA graphs): record the step's kernels once per set of bound
  // addresses and replay them, one launch per step instead of one per node. Same kernels in the
  // same order, so the same bits. Off while profiling; falls back to launching node by node
  // (with a warning) if capturing fails.
  void set_capture(bool on) { capture_ = on; }
  int captures() const { return captures_; }  // graphs recorded so far
  int64_t allocated_bytes() const { return arena_bytes_; }  // what the executor allocated
  Device* device() const { return device_; }

 private:
  void prepare();
  void run_nodes();
  const Graph& g_;
  MemoryPlan plan_;
  Device* device_ = nullptr;
  struct Release {
    Device* device;
    void operator()(char* p) const;
  };
  std::unique_ptr<char, Release> arena_;
  int64_t arena_bytes_ = 0;
  std::vector<std::vector<TensorView>> out_;  // [node][output]
  std::vector<std::vector<TensorView>> in_;   // [node][input], resolved by prepare()
  std::vector<int> compute_;                  // ids of nodes with kernels, in order
  std::vector<Kernel> kernels_;               // [node]: the CPU's or the device's
  std::vector<int> bound_;                    // ids of input and param nodes (their addresses key captured steps)
  bool prepared_ = false;
  std::vector<double> profile_;
  bool capture_ = false;
  int captures_ = 0;
  int64_t runs_ = 0;
  std::map<std::vector<void*>, std::shared_ptr<void>> graphs_;  // bound addresses -> captured step
};

}  // namespace mnemo
