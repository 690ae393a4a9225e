// The CPU device (see cpu_device.h).
#include "core/cpu_device.h"

#include <omp.h>

#include <atomic>
#include <cstdlib>
#include <cstring>
#include <map>
#include <mutex>

#include "core/graph.h"
#include "core/memory_plan.h"

namespace mnemo {
namespace {

class CpuDevice final : public Device {
 public:
  ~CpuDevice() override {
    for (char* s : slots_) release(s);
  }
  std::string name() const override { return "cpu (" + std::to_string(omp_get_max_threads()) + " threads)"; }

  // The op's prepare function (stateful kernels: oneDNN primitives) or its workspace function.
  // Memoised by op, attributes, types and thread count (primitives depend on the thread count),
  // so the mirror search, which plans many graphs holding the same nodes, prepares each once.
  PreparedKernel prepare(const Graph& g, int id) const override {
    const Node& n = g.node(id);
    MNEMO_CHECK(n.op->cpu) << "node '" << n.name << "': op '" << n.op->name << "' has no CPU kernel";
    std::vector<TensorType> in;
    for (const EntryRef& e : n.inputs) in.push_back(g.type(e));
    if (!n.op->prepare) {
      const size_t ws = n.op->workspace ? n.op->workspace(n.params.get(), in, n.outputs) : 0;
      return {n.op->cpu, nullptr, ws};
    }
    std::string key = n.op->name + '|' + std::to_string(omp_get_max_threads());
    for (const auto& [k, v] : n.attrs) key += '|' + k + '=' + attr_str(v);
    for (const TensorType& t : in) key += '|' + t.str();
    key += "->";
    for (const TensorType& t : n.outputs) key += '|' + t.str();
    {
      std::lock_guard<std::mutex> lock(mu_);
      if (auto it = prepared_.find(key); it != prepared_.end()) return {n.op->cpu, it->second.state, it->second.workspace};
    }
    Prepared p;
    try {
      p = n.op->prepare(n.params.get(), in, n.outputs);
    } catch (const Error& e) {
      throw Error("preparing node '" + n.name + "' (" + n.op->name + "): " + e.what());
    }
    std::lock_guard<std::mutex> lock(mu_);
    prepared_.emplace(key, p);
    return {n.op->cpu, p.state, p.workspace};
  }
  bool host_memory() const override { return true; }
  void* kernel_context() override { return nullptr; }

  void* allocate(int64_t bytes, const std::string& what) override {
    if (bytes <= 0) return nullptr;
    void* p = std::aligned_alloc(kArenaAlignment, static_cast<size_t>(align_up(bytes)));
    MNEMO_CHECK(p) << "cannot allocate " << what << " (" << bytes << " bytes): out of memory";
    std::lock_guard<std::mutex> lock(mu_);
    sizes_[p] = bytes;
    allocated_ += bytes;
    return p;
  }
  void release(void* p) noexcept override {
    if (!p) return;
    {
      std::lock_guard<std::mutex> lock(mu_);
      auto it = sizes_.find(p);
      if (it != sizes_.end()) allocated_ -= it->second, sizes_.erase(it);
    }
    std::free(p);
  }
  void copy(void* dst, const void* src, int64_t bytes, CopyKind) override {
    if (bytes > 0 && dst != src) std::memmove(dst, src, static_cast<size_t>(bytes));
  }
  void synchronize() override {}

  void reserve_inputs(std::span<const TensorType> types, int slots) override {
    MNEMO_ASSERT(slots >= 1 && slots_.empty()) << "reserve_inputs: slots must be >= 1, once";
    types_.assign(types.begin(), types.end());
    for (int i = 0; i < slots; ++i) slots_.push_back(static_cast<char*>(allocate(staging_bytes(types_), "the input staging buffers")));
  }
  std::vector<TensorView> stage_inputs(std::span<const TensorView> host) override {
    MNEMO_ASSERT(!slots_.empty()) << "stage_inputs before reserve_inputs";
    char* slot = slots_[next_];
    next_ = (next_ + 1) % slots_.size();
    return pack_inputs(host, types_, slot, slot);
  }
  int64_t memory_in_use() const override { return allocated_; }
  int64_t memory_at_open() const override { return 0; }
  int64_t allocated_bytes() const override { return allocated_; }

 private:
  mutable std::mutex mu_;
  mutable std::map<std::string, Prepared> prepared_;
  std::map<void*, int64_t> sizes_;
  std::atomic<int64_t> allocated_{0};
  std::vector<TensorType> types_;
  std::vector<char*> slots_;
  size_t next_ = 0;
};

}  // namespace

std::unique_ptr<Device> make_cpu_device() { return std::make_unique<CpuDevice>(); }

Device& cpu_device() {
  static CpuDevice* d = new CpuDevice;  // never destroyed: executors may outlive static destruction order
  return *d;
}

}  // namespace mnemo
