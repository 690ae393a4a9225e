// The executor: binds one arena (allocated once, sized by the memory plan, or borrowed from
// another executor that is idle meanwhile), the parameters and the step's inputs, then runs the
// graph's nodes in order (the schedule) on a Device (core/device.h; null: the CPU device): the
// arena is one device allocation, bound views are device memory, each node runs the kernel the
// plan prepared for it with that kernel's state, asynchronously on a GPU (fetch() waits).
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
  // `device`: null runs on the CPU device; else the plan must have been made for that device.
  // `arena`: memory of at least plan.arena_bytes on that device to use instead of allocating
  // (another executor's, idle while this one runs); null: allocate.
  Executor(const Graph& g, MemoryPlan plan, Device* device = nullptr, char* arena = nullptr, int64_t arena_bytes = 0);
  ~Executor();
  Executor(const Executor&) = delete;
  Executor& operator=(const Executor&) = delete;

  // Binds an input or param node (by name or id) to caller-owned memory of exactly its type: only
  // the addresses its readers (and views of it) see change.
  void bind(const std::string& name, TensorView v);
  void bind(int node, TensorView v);
  void run();

  TensorView entry(EntryRef e) const;  // valid after run() (or bind, for bound nodes); device memory on a device
  Tensor fetch(EntryRef e) const;      // a host copy of an entry (waits for the device)

  // Diagnosis after a non-finite result: scans the bound inputs and parameters, then runs the step
  // again node by node (nodes that update state, the optimiser, are skipped) and returns the first
  // node holding a NaN or Inf in a float output, or node -1 when every value is finite. Slow (each
  // output is copied and scanned); never used in the step loop.
  struct NonFinite {
    int node = -1;
    int output = 0;
    int64_t index = 0;  // first non-finite element
    double value = 0;
  };
  NonFinite find_non_finite();
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
  int64_t allocated_bytes() const { return owns_arena_ ? arena_bytes_ : 0; }  // what the executor allocated
  int64_t arena_bytes() const { return arena_bytes_; }
  char* arena() const { return arena_.get(); }  // to lend to an executor that runs while this one is idle
  Device* device() const { return device_; }
  const Graph& graph() const { return g_; }

 private:
  void set_address(int e, void* data);  // output entry e (flat) and every reader and alias of it
  int flat(EntryRef e) const { return out_begin_[static_cast<size_t>(e.node)] + e.index; }
  void check_bound() const;
  void run_node(int id);
  void run_nodes();
  const Graph& g_;
  MemoryPlan plan_;  // its kernels are the ones run: prepared for the device (the plan's)
  Device* device_ = nullptr;
  struct Release {
    Device* device;
    bool owned;
    void operator()(char* p) const;
  };
  std::unique_ptr<char, Release> arena_;
  int64_t arena_bytes_ = 0;
  bool owns_arena_ = true;
  // Flat tables: node i's outputs are out_[out_begin_[i] .. out_begin_[i + 1]) (an output entry's
  // flat index, flat()), its inputs in_[in_begin_[i] .. in_begin_[i + 1]) (resolved once); the
  // readers of output entry e are the input slots readers_[readers_begin_[e] ..), the outputs that
  // alias it (views, state updated in place) the entries aliases_[aliases_begin_[e] ..).
  std::vector<TensorView> out_, in_;
  std::vector<int> out_begin_, in_begin_;
  std::vector<int> readers_begin_, readers_, aliases_begin_, aliases_;
  int64_t unbound_ = 0;                       // bound nodes (non-empty) without an address yet
  std::vector<int> compute_;                  // ids of nodes with kernels, in order
  std::vector<int> bound_;                    // ids of input and param nodes (their addresses key captured steps)
  std::vector<double> profile_;
  bool capture_ = false;
  int captures_ = 0;
  int64_t runs_ = 0;
  std::map<std::vector<void*>, std::shared_ptr<void>> graphs_;  // bound addresses -> captured step
};

}  // namespace mnemo
