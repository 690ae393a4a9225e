// The host device (see host_device.h).
#include "core/host_device.h"

#include <cstdlib>
#include <cstring>
#include <map>

#include "core/graph.h"
#include "core/memory_plan.h"

namespace mnemo {
namespace {

class HostDevice final : public Device {
 public:
  ~HostDevice() override {
    for (char* s : slots_) release(s);
  }
  std::string name() const override { return "host (the device code path on the CPU)"; }
  size_t workspace_bytes(const Graph& g, int id) const override { return node_workspace_bytes(g, id, nullptr); }
  Kernel kernel(const Graph& g, int id) const override {
    const Node& n = g.node(id);
    MNEMO_CHECK(n.op->cpu) << "node '" << n.name << "': op '" << n.op->name << "' has no CPU kernel";
    return n.op->cpu;
  }
  Kernel kernel(const std::string& op) const override { return op_registry().get(op).cpu; }
  void* kernel_context() override { return nullptr; }

  void* allocate(int64_t bytes, const std::string& what) override {
    if (bytes <= 0) return nullptr;
    void* p = std::aligned_alloc(kArenaAlignment, static_cast<size_t>(align_up(bytes)));
    MNEMO_CHECK(p) << "cannot allocate " << what << " (" << bytes << " bytes)";
    sizes_[p] = bytes;
    allocated_ += bytes;
    return p;
  }
  void release(void* p) noexcept override {
    if (!p) return;
    auto it = sizes_.find(p);
    if (it != sizes_.end()) allocated_ -= it->second, sizes_.erase(it);
    std::free(p);
  }
  void copy(void* dst, const void* src, int64_t bytes, CopyKind) override {
    if (bytes > 0) std::memmove(dst, src, static_cast<size_t>(bytes));
  }
  void synchronize() override {}

  void reserve_inputs(std::span<const TensorType> types, int slots) override {
    MNEMO_CHECK(slots >= 1 && slots_.empty()) << "reserve_inputs: slots must be >= 1, once";
    types_.assign(types.begin(), types.end());
    for (int i = 0; i < slots; ++i) slots_.push_back(static_cast<char*>(allocate(staging_bytes(types_), "the input staging buffers")));
  }
  std::vector<TensorView> stage_inputs(std::span<const TensorView> host) override {
    MNEMO_CHECK(!slots_.empty()) << "stage_inputs before reserve_inputs";
    char* slot = slots_[next_];
    next_ = (next_ + 1) % slots_.size();
    return pack_inputs(host, types_, slot, slot);
  }
  int64_t memory_in_use() const override { return allocated_; }
  int64_t memory_at_open() const override { return 0; }
  int64_t allocated_bytes() const override { return allocated_; }

 private:
  std::map<void*, int64_t> sizes_;
  int64_t allocated_ = 0;
  std::vector<TensorType> types_;
  std::vector<char*> slots_;
  size_t next_ = 0;
};

}  // namespace

std::unique_ptr<Device> make_host_device() { return std::make_unique<HostDevice>(); }

}  // namespace mnemo
