// The CPU device (see cpu_device.h).
#include "core/cpu_device.h"

#include <omp.h>

#include <atomic>
#include <cstdlib>
#include <cstring>
#include <map>
#include <mutex>
#include <string>
#include <unordered_map>
#include <variant>

#include "core/graph.h"
#include "core/memory_plan.h"

namespace mnemo {
namespace {

// The kernel cache's key: op, thread count, attributes, input and output types, as raw bytes
// with every variable-length part length-prefixed, so two keys are equal exactly when all of
// these are (text with separators cost the budget planner's ResNet-152 family 16% of its time
// in ostringstream formatting).
template <class T>
void put(std::string& key, const T& v) {
  key.append(reinterpret_cast<const char*>(&v), sizeof(T));
}
void put_bytes(std::string& key, const char* p, size_t n) {
  put(key, static_cast<uint64_t>(n));
  key.append(p, n);
}
void put_type(std::string& key, const TensorType& t) {
  put(key, static_cast<int32_t>(t.dtype));
  put_bytes(key, reinterpret_cast<const char*>(t.shape.data()), t.shape.size() * sizeof(int64_t));
}
std::string kernel_key(const Node& n, const std::vector<TensorType>& in) {
  std::string key;
  key.reserve(256);
  put_bytes(key, n.op->name.data(), n.op->name.size());
  put(key, static_cast<int32_t>(omp_get_max_threads()));
  put(key, static_cast<uint64_t>(n.attrs.size()));
  for (const auto& [k, v] : n.attrs) {
    put_bytes(key, k.data(), k.size());
    put(key, static_cast<uint8_t>(v.index()));
    std::visit(
        [&](const auto& x) {
          using X = std::decay_t<decltype(x)>;
          if constexpr (std::is_same_v<X, std::string>) put_bytes(key, x.data(), x.size());
          else if constexpr (std::is_same_v<X, std::vector<int64_t>>)
            put_bytes(key, reinterpret_cast<const char*>(x.data()), x.size() * sizeof(int64_t));
          else put(key, x);
        },
        v);
  }
  for (const std::vector<TensorType>* ts : {&in, &n.outputs}) {
    put(key, static_cast<uint64_t>(ts->size()));
    for (const TensorType& t : *ts) put_type(key, t);
  }
  return key;
}

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
    const std::vector<TensorType>& in = input_types(g, id);
    if (!n.op->prepare) {
      const size_t ws = n.op->workspace ? n.op->workspace(n.params.get(), in, n.outputs) : 0;
      return {n.op->cpu, nullptr, ws};
    }
    const std::string key = kernel_key(n, in);
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
  mutable std::unordered_map<std::string, Prepared> prepared_;
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
