// CudaDevice (see device.h).
#include "cuda/device.h"

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <sstream>
#include <thread>

#include "core/graph.h"
#include "core/memory_plan.h"
#include "cuda/check.h"
#include "cuda/context.h"

namespace mnemo::cuda {

const char* cublas_status_name(cublasStatus_t s) {
  switch (s) {
    case CUBLAS_STATUS_SUCCESS: return "CUBLAS_STATUS_SUCCESS";
    case CUBLAS_STATUS_NOT_INITIALIZED: return "CUBLAS_STATUS_NOT_INITIALIZED";
    case CUBLAS_STATUS_ALLOC_FAILED: return "CUBLAS_STATUS_ALLOC_FAILED";
    case CUBLAS_STATUS_INVALID_VALUE: return "CUBLAS_STATUS_INVALID_VALUE";
    case CUBLAS_STATUS_ARCH_MISMATCH: return "CUBLAS_STATUS_ARCH_MISMATCH";
    case CUBLAS_STATUS_MAPPING_ERROR: return "CUBLAS_STATUS_MAPPING_ERROR";
    case CUBLAS_STATUS_EXECUTION_FAILED: return "CUBLAS_STATUS_EXECUTION_FAILED";
    case CUBLAS_STATUS_INTERNAL_ERROR: return "CUBLAS_STATUS_INTERNAL_ERROR";
    case CUBLAS_STATUS_NOT_SUPPORTED: return "CUBLAS_STATUS_NOT_SUPPORTED";
    case CUBLAS_STATUS_LICENSE_ERROR: return "CUBLAS_STATUS_LICENSE_ERROR";
    default: return "unknown cuBLAS status";
  }
}

void KernelTable::add(const std::string& op, CudaOp k) {
  MNEMO_CHECK(op_registry().find(op)) << "CUDA kernel for '" << op << "': no such op in the registry";
  MNEMO_CHECK(k.run) << "CUDA kernel for '" << op << "' is null";
  MNEMO_CHECK(ops_.emplace(op, k).second) << "CUDA kernel for '" << op << "' registered twice";
}

const CudaOp* KernelTable::find(const std::string& op) const {
  auto it = ops_.find(op);
  return it == ops_.end() ? nullptr : &it->second;
}

std::vector<std::string> KernelTable::names() const {
  std::vector<std::string> v;
  for (const auto& [name, k] : ops_) v.push_back(name);
  return v;
}

int device_count(std::string* why) {
  int n = 0;
  const cudaError_t e = cudaGetDeviceCount(&n);
  if (e != cudaSuccess) {
    if (why) *why = std::string(cudaGetErrorName(e)) + ": " + cudaGetErrorString(e);
    cudaGetLastError();  // clear the sticky-free error so later calls start clean
    return 0;
  }
  if (n == 0 && why) *why = "the driver reports no CUDA device";
  return n;
}

namespace {

int64_t used_now() {
  size_t free = 0, total = 0;
  MNEMO_CUDA_CHECK(cudaMemGetInfo(&free, &total));
  return static_cast<int64_t>(total - free);
}

class CudaDevice final : public Device {
 public:
  explicit CudaDevice(int ordinal) {
    try {
      open(ordinal);
    } catch (...) {
      close();  // the destructor does not run when the constructor throws
      throw;
    }
  }
  ~CudaDevice() override { close(); }

  std::string name() const override {
    return "cuda:" + std::to_string(ctx_.ordinal) + " (" + ctx_.prop.name + ")";
  }

  PreparedKernel prepare(const Graph& g, int id) const override {
    const Node& n = g.node(id);
    const CudaOp* k = kernel_table().find(n.op->name);
    MNEMO_CHECK(k) << "node '" << n.name << "': op '" << n.op->name << "' has no CUDA kernel";
    auto check_type = [&](const TensorType& t) {
      MNEMO_CHECK(t.dtype != DType::f64) << "node '" << n.name << "' (" << n.op->name << ") is " << t.str()
                                         << ": the CUDA backend runs float32 graphs (float64 is for the CPU's gradient checks)";
    };
    std::vector<TensorType> in;
    for (const EntryRef& e : n.inputs) check_type(in.emplace_back(g.type(e)));
    for (const TensorType& t : n.outputs) check_type(t);
    if (k->prepare) {
      Prepared p = k->prepare(ctx_, n.params.get(), in, n.outputs);
      return {k->run, std::move(p.state), p.workspace};
    }
    return {k->run, nullptr, k->workspace ? k->workspace(ctx_, n.params.get(), in, n.outputs) : 0};
  }

  void* kernel_context() override { return &ctx_; }

  void* allocate(int64_t bytes, const std::string& what) override {
    if (bytes <= 0) return nullptr;
    void* p = nullptr;
    const cudaError_t e = cudaMalloc(&p, static_cast<size_t>(bytes));
    if (e != cudaSuccess) {
      cudaGetLastError();
      size_t free = 0, total = 0;
      cudaMemGetInfo(&free, &total);
      MNEMO_FAIL() << "cannot allocate " << what << " on " << name() << ": " << bytes << " bytes requested, " << free
                   << " of " << total << " bytes free (" << cudaGetErrorString(e)
                   << "); try a memory mode that saves more (sublinear, optimal, recursive) or a smaller batch";
    }
    sizes_.push_back({p, bytes});
    allocated_ += bytes;
    return p;
  }

  void release(void* p) noexcept override {
    if (!p || stuck_) return;  // (stuck: work that never ends may still use it; the process is ending)
    cudaStreamSynchronize(ctx_.stream);
    for (size_t i = 0; i < sizes_.size(); ++i)
      if (sizes_[i].first == p) {
        allocated_ -= sizes_[i].second;
        sizes_.erase(sizes_.begin() + static_cast<std::ptrdiff_t>(i));
        break;
      }
    cudaFree(p);
  }

  void copy(void* dst, const void* src, int64_t bytes, CopyKind kind) override {
    if (bytes <= 0) return;
    const cudaMemcpyKind k = kind == CopyKind::host_to_device   ? cudaMemcpyHostToDevice
                             : kind == CopyKind::device_to_host ? cudaMemcpyDeviceToHost
                                                                : cudaMemcpyDeviceToDevice;
    MNEMO_CUDA_CHECK(cudaMemcpyAsync(dst, src, static_cast<size_t>(bytes), k, ctx_.stream));
    if (kind != CopyKind::device_to_device) wait_stream(ctx_.stream, "a copy to the host");
  }

  void synchronize() override { wait_stream(ctx_.stream, "the step's work"); }

  void limit_waits(double seconds, const std::string& who, std::function<void(const std::string&)> on_timeout) override {
    MNEMO_CHECK(seconds > 0) << "a wait limit must be positive, got " << seconds;
    if (!wait_event_) MNEMO_CUDA_CHECK(cudaEventCreateWithFlags(&wait_event_, cudaEventDisableTiming));
    limit_s_ = seconds;
    who_ = who;
    on_timeout_ = std::move(on_timeout);
  }

  void reserve_inputs(std::span<const TensorType> types, int slots) override {
    MNEMO_CHECK(slots >= 1) << "reserve_inputs: slots must be >= 1";
    MNEMO_CHECK(slots_.empty()) << "reserve_inputs: already reserved";
    types_.assign(types.begin(), types.end());
    slot_bytes_ = staging_bytes(types_);
    slots_.resize(static_cast<size_t>(slots));
    for (Slot& s : slots_) {
      s.device = static_cast<char*>(allocate(slot_bytes_, "the input staging buffers"));
      void* pinned = nullptr;
      MNEMO_CUDA_CHECK(cudaMallocHost(&pinned, static_cast<size_t>(slot_bytes_)));
      s.pinned = static_cast<char*>(pinned);
      MNEMO_CUDA_CHECK(cudaEventCreateWithFlags(&s.done, cudaEventDisableTiming));
      MNEMO_CUDA_CHECK(cudaEventCreateWithFlags(&s.copied, cudaEventDisableTiming));
    }
  }

  std::vector<TensorView> stage_inputs(std::span<const TensorView> host) override {
    MNEMO_CHECK(!slots_.empty()) << "stage_inputs before reserve_inputs";
    // Everything enqueued on the compute stream since the last call read the last slot: mark its end.
    if (last_) MNEMO_CUDA_CHECK(cudaEventRecord(last_->done, ctx_.stream));
    Slot& s = slots_[next_];
    next_ = (next_ + 1) % slots_.size();
    // The slot's previous step must be done reading it (and its last upload done reading pinned).
    wait_event(s.done, "the step that read an input slot");
    wait_event(s.copied, "an input upload");
    std::vector<TensorView> out = pack_inputs(host, types_, s.pinned, s.device);
    MNEMO_CUDA_CHECK(cudaMemcpyAsync(s.device, s.pinned, static_cast<size_t>(slot_bytes_), cudaMemcpyHostToDevice, copy_stream_));
    MNEMO_CUDA_CHECK(cudaEventRecord(s.copied, copy_stream_));
    MNEMO_CUDA_CHECK(cudaStreamWaitEvent(ctx_.stream, s.copied, 0));
    last_ = &s;
    return out;
  }

  std::shared_ptr<void> capture(const std::function<void()>& work) override {
    // Thread-local mode: only this thread's calls are checked against the capture (the loader's
    // threads and the planner's do not touch the device).
    MNEMO_CUDA_CHECK(cudaStreamBeginCapture(ctx_.stream, cudaStreamCaptureModeThreadLocal));
    try {
      work();
    } catch (...) {
      cudaGraph_t partial = nullptr;
      cudaStreamEndCapture(ctx_.stream, &partial);
      if (partial) cudaGraphDestroy(partial);
      cudaGetLastError();
      throw;
    }
    cudaGraph_t graph = nullptr;
    MNEMO_CUDA_CHECK(cudaStreamEndCapture(ctx_.stream, &graph));
    cudaGraphExec_t exec = nullptr;
    const cudaError_t e = cudaGraphInstantiate(&exec, graph, 0);
    cudaGraphDestroy(graph);
    MNEMO_CHECK(e == cudaSuccess) << "cudaGraphInstantiate failed: " << cudaGetErrorString(e);
    return std::shared_ptr<void>(exec, [](void* p) { cudaGraphExecDestroy(static_cast<cudaGraphExec_t>(p)); });
  }

  void replay(const void* captured) override {
    MNEMO_CUDA_CHECK(cudaGraphLaunch(static_cast<cudaGraphExec_t>(const_cast<void*>(captured)), ctx_.stream));
  }

  int64_t memory_in_use() const override { return used_now(); }
  int64_t memory_at_open() const override { return at_open_; }
  int64_t allocated_bytes() const override { return allocated_; }
  int64_t memory_free() const override {
    size_t free = 0, total = 0;
    return cudaMemGetInfo(&free, &total) == cudaSuccess ? static_cast<int64_t>(free) : -1;
  }

 private:
  // Host waits: unbounded (the driver's own wait) unless limit_waits set a limit; then the event
  // is polled until the deadline (yielding first, then sleeping 50 us: a few microseconds of
  // latency on a step of milliseconds).
  void wait_event(cudaEvent_t e, const char* what) {
    refuse_if_stuck();
    if (limit_s_ <= 0) {
      MNEMO_CUDA_CHECK(cudaEventSynchronize(e));
      return;
    }
    using clock = std::chrono::steady_clock;
    const auto t0 = clock::now();
    for (int polls = 0;; ++polls) {
      const cudaError_t r = cudaEventQuery(e);
      if (r == cudaSuccess) return;
      if (r != cudaErrorNotReady) MNEMO_CUDA_CHECK(r);
      if (clock::now() - t0 > std::chrono::duration<double>(limit_s_)) break;
      if (polls < 1000)
        std::this_thread::yield();
      else
        std::this_thread::sleep_for(std::chrono::microseconds(50));
    }
    // Over the limit: abort what waits (NCCL ends its kernels), then give the device a moment to
    // drain; if it does not, nothing more is freed or waited for on it.
    char limit[32];
    std::snprintf(limit, sizeof limit, "%g", limit_s_);
    const std::string msg = who_ + ": " + what + " on " + name() + " did not complete within " + limit +
                            " s (parallel.timeout_s): the step's gradient gathers wait for every rank, so another rank "
                            "died, hangs or runs a different step";
    if (on_timeout_) on_timeout_(msg);
    const auto t1 = clock::now();
    cudaError_t r = cudaEventQuery(e);
    while (r == cudaErrorNotReady && clock::now() - t1 < std::chrono::seconds(5)) {
      std::this_thread::sleep_for(std::chrono::milliseconds(1));
      r = cudaEventQuery(e);
    }
    stuck_ = r == cudaErrorNotReady;
    cudaGetLastError();  // (an aborted communicator may leave an error behind)
    MNEMO_FAIL() << msg << "; the communicator was aborted"
                 << (stuck_ ? " and the device's work did not end (its memory is left to the process's exit)" : "");
  }
  // Everything queued on `s` so far: the driver's own wait, or an event polled under the limit.
  void wait_stream(cudaStream_t s, const char* what) {
    refuse_if_stuck();
    if (limit_s_ <= 0) {
      MNEMO_CUDA_CHECK(cudaStreamSynchronize(s));
      return;
    }
    MNEMO_CUDA_CHECK(cudaEventRecord(wait_event_, s));
    wait_event(wait_event_, what);
  }
  void refuse_if_stuck() const {
    MNEMO_CHECK(!stuck_) << who_ << ": " << name() << " still runs work that timed out earlier";
  }

  void open(int ordinal) {
    ctx_.ordinal = ordinal;
    MNEMO_CUDA_CHECK(cudaSetDevice(ordinal));
    MNEMO_CUDA_CHECK(cudaGetDeviceProperties(&ctx_.prop, ordinal));
    MNEMO_CUDA_CHECK(cudaFree(nullptr));  // creates the context now, so memory_at_open counts it
    MNEMO_CUDA_CHECK(cudaStreamCreateWithFlags(&ctx_.stream, cudaStreamNonBlocking));
    MNEMO_CUDA_CHECK(cudaStreamCreateWithFlags(&copy_stream_, cudaStreamNonBlocking));
    MNEMO_CUDNN_CHECK(cudnnCreate(&ctx_.cudnn));
    MNEMO_CUDNN_CHECK(cudnnSetStream(ctx_.cudnn, ctx_.stream));
    MNEMO_CUBLAS_CHECK(cublasCreate(&ctx_.cublas));
    MNEMO_CUBLAS_CHECK(cublasSetStream(ctx_.cublas, ctx_.stream));
    // cuBLAS would otherwise allocate its own workspace per stream on first use, inside the step
    // loop; it gets one fixed buffer now, before memory_at_open is taken (the library's own use,
    // like the handles; cuBLAS documents failures with less than 16 KiB). Deterministic: one
    // stream, one workspace, no atomics in reductions.
    MNEMO_CUDA_CHECK(cudaMalloc(&cublas_workspace_, kCublasWorkspace));
    MNEMO_CUBLAS_CHECK(cublasSetWorkspace(ctx_.cublas, cublas_workspace_, kCublasWorkspace));
    MNEMO_CUBLAS_CHECK(cublasSetAtomicsMode(ctx_.cublas, CUBLAS_ATOMICS_NOT_ALLOWED));
    MNEMO_CUBLAS_CHECK(cublasSetMathMode(ctx_.cublas, CUBLAS_PEDANTIC_MATH));  // float32, no TF32
    MNEMO_CUDA_CHECK(cudaDeviceSynchronize());
    at_open_ = used_now();
  }

  void close() noexcept {
    if (stuck_) return;  // work that timed out never ended: leave everything to the process's exit
    if (ctx_.stream) cudaStreamSynchronize(ctx_.stream);
    if (wait_event_) cudaEventDestroy(wait_event_);
    for (Slot& s : slots_) {
      if (s.done) cudaEventDestroy(s.done);
      if (s.copied) cudaEventDestroy(s.copied);
      if (s.pinned) cudaFreeHost(s.pinned);
      if (s.device) cudaFree(s.device);
    }
    if (ctx_.cublas) cublasDestroy(ctx_.cublas);
    if (cublas_workspace_) cudaFree(cublas_workspace_);
    if (ctx_.cudnn) cudnnDestroy(ctx_.cudnn);
    if (copy_stream_) cudaStreamDestroy(copy_stream_);
    if (ctx_.stream) cudaStreamDestroy(ctx_.stream);
  }

  struct Slot {
    char* device = nullptr;
    char* pinned = nullptr;
    cudaEvent_t done = nullptr;    // the step that read this slot finished
    cudaEvent_t copied = nullptr;  // the upload into this slot finished
  };
  static constexpr size_t kCublasWorkspace = size_t{4} << 20;
  mutable Context ctx_;
  void* cublas_workspace_ = nullptr;
  cudaStream_t copy_stream_ = nullptr;
  int64_t at_open_ = 0;
  int64_t allocated_ = 0;
  std::vector<std::pair<void*, int64_t>> sizes_;
  std::vector<TensorType> types_;
  int64_t slot_bytes_ = 0;
  std::vector<Slot> slots_;
  size_t next_ = 0;
  Slot* last_ = nullptr;
  // limit_waits
  double limit_s_ = 0;
  std::string who_ = "this process";
  std::function<void(const std::string&)> on_timeout_;
  cudaEvent_t wait_event_ = nullptr;
  bool stuck_ = false;
};

}  // namespace

std::unique_ptr<Device> open_device(int ordinal) {
  std::string why;
  const int n = device_count(&why);
  // (The device comes from --device or the config's `device:`: the message names neither.)
  MNEMO_CHECK(n > 0) << "device cuda: no CUDA device is usable on this machine (" << why
                     << "); run on a machine with an NVIDIA GPU and driver, or use the cpu device";
  MNEMO_CHECK(ordinal >= 0 && ordinal < n) << "device cuda:" << ordinal << ": this machine has " << n
                                          << " CUDA device(s), numbered 0.." << n - 1;
  return std::make_unique<CudaDevice>(ordinal);
}

}  // namespace mnemo::cuda
