// A backend an executor runs on: the CPU (core/cpu_device.h) or CUDA (cuda/). Every step runs
// through this interface, whatever the device (a null Device* means the process's CPU device,
// cpu_device()). A Device answers the three questions the static pipeline asks of a backend:
//   planning   each node's prepared kernel there: its state and exact workspace (the planner puts
//              the workspace in the arena, the executor keeps the state);
//   execution  the per-device context every kernel gets (streams, handles);
//   memory     one allocation per arena, copies in the device's stream order.
// Kernels on a device are asynchronous: results are ready after synchronize() (Executor::fetch
// does it). core knows no particular device.
#pragma once
#include <cstdint>
#include <functional>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "core/op_registry.h"

namespace mnemo {

class Graph;

enum class CopyKind { host_to_device, device_to_host, device_to_device };

class Device {
 public:
  virtual ~Device() = default;
  virtual std::string name() const = 0;  // e.g. "cuda:0 (NVIDIA H100 80GB HBM3)"

  // Prepares node `id` of `g` to run here: its kernel, the per-node state that kernel keeps
  // (primitive descriptors, algorithm choices) and the exact workspace bytes of that state. Called
  // when a plan is made, never in the step loop; throws naming the node when the op has no kernel
  // here (or not for this dtype). May be called from several threads at once (the mirror search
  // plans candidates in parallel); a device may memoise by the node's op, attributes and types.
  virtual PreparedKernel prepare(const Graph& g, int id) const = 0;
  // Whether kernels read host memory directly (the CPU): parameters bound from the host stores
  // need no copy on this device.
  virtual bool host_memory() const { return false; }
  // Passed to every kernel as KernelContext::device.
  virtual void* kernel_context() = 0;

  // One device allocation; throws naming `what`, the size and the free memory when it fails.
  virtual void* allocate(int64_t bytes, const std::string& what) = 0;
  virtual void release(void* p) noexcept = 0;
  // Copies in stream order (device_to_host waits for the copy to finish).
  virtual void copy(void* dst, const void* src, int64_t bytes, CopyKind kind) = 0;
  virtual void synchronize() = 0;

  // Bounds every host wait on this device's work (synchronize, copies to the host, input slots)
  // to `seconds`: a data-parallel GPU run whose step waits in NCCL for a rank that died or hangs
  // would otherwise wait forever (docs/PARALLEL.md). When a wait runs over, `on_timeout` is
  // called with the message (it aborts the communicator, which ends the waiting kernels) and the
  // wait throws mnemo::Error with it: it names `who`, what was waited for and the limit. A device whose work still does
  // not drain after that frees nothing more (the process is ending). Default: waits are unbounded;
  // devices whose waits cannot hang (the CPU: its collectives time out themselves) ignore it.
  virtual void limit_waits(double seconds, const std::string& who, std::function<void(const std::string&)> on_timeout) {}

  // Input staging for the training loop: `reserve_inputs` allocates `slots` device buffers for
  // tensors of `types` once, before the loop; `stage_inputs` copies the host tensors into the next
  // slot on a copy stream that runs beside compute (the compute stream waits for that copy only)
  // and returns device views to bind. A slot is reused only after the step that read it finished.
  // Call order: stage, enqueue the step that reads those views, stage the next, ... — each call
  // marks the end of the work enqueued since the previous one as the end of that slot's use.
  virtual void reserve_inputs(std::span<const TensorType> types, int slots) = 0;
  virtual std::vector<TensorView> stage_inputs(std::span<const TensorView> host) = 0;

  // Step capture (CUDA graphs): records the device work that `work` enqueues — without running it
  // — into an object `replay` launches again in one call. Null when the device cannot capture;
  // then the caller runs `work` itself. Throws when capturing fails (the caller may fall back).
  virtual std::shared_ptr<void> capture(const std::function<void()>& work) { return nullptr; }
  virtual void replay(const void* captured) {}

  // Bytes of device memory in use now (cudaMemGetInfo: total - free), and the same at open,
  // after the context and the library handles were created.
  virtual int64_t memory_in_use() const = 0;
  virtual int64_t memory_at_open() const = 0;
  virtual int64_t allocated_bytes() const = 0;  // sum of live allocate() calls
  // Bytes the device could still allocate (cudaMemGetInfo's free memory); -1 when unknown. A
  // device that reads host memory answers -1: the host's is checked from /proc and the cgroup.
  virtual int64_t memory_free() const { return -1; }
};

// The process's CPU device (core/cpu_device.cpp), used wherever a null Device* is passed; and the
// device a possibly-null pointer means.
Device& cpu_device();
inline Device& device_or_cpu(Device* d) { return d ? *d : cpu_device(); }
inline const Device& device_or_cpu(const Device* d) { return d ? *d : cpu_device(); }

// The layout of one input staging slot, shared by the devices: the tensors of `types` back to
// back, each 256-byte aligned. staging_bytes: the slot's size. pack_inputs: checks `host` against
// `types`, copies it into `dst` (host memory: the slot itself, or its pinned mirror) and returns
// views at the same offsets from `base` (the slot where kernels will read it).
int64_t staging_bytes(std::span<const TensorType> types);
std::vector<TensorView> pack_inputs(std::span<const TensorView> host, std::span<const TensorType> types, char* dst,
                                    char* base);

}  // namespace mnemo
