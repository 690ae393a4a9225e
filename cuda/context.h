// What every CUDA kernel of mnemo sees through KernelContext::device: the device's compute stream
// and library handles, created once when the device is opened. Host code only (g++).
#pragma once
#include <cublas_v2.h>
#include <cuda_runtime_api.h>
#include <cudnn.h>

#include <climits>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <span>
#include <string>

#include "core/op_registry.h"

namespace mnemo::cuda {

struct Context {
  int ordinal = 0;
  cudaStream_t stream = nullptr;  // every kernel, cuDNN and cuBLAS call of a step runs here
  cudnnHandle_t cudnn = nullptr;  // bound to `stream`
  cublasHandle_t cublas = nullptr;  // bound to `stream`, pointer mode host, workspace: none (see device.cpp)
  cudaDeviceProp prop{};
  // The most elements x or y of one cuDNN convolution launch may hold (its legacy descriptors index
  // with int): a larger batch is split into launches along the batch (cuda/ops_conv2d.cpp). Tests
  // lower it to split small convolutions; set it before the plans are made.
  int64_t conv_launch_elements = INT_MAX;

  // A per-device cache of objects derived from shapes (cuDNN algorithm choices): built once per
  // key, thread-safe (the mirror planner scores candidate plans in parallel). Used when plans are
  // made (CudaOp::prepare), never by kernels in the step loop.
  template <class T>
  const T& cached(const std::string& key, const std::function<T()>& make) {
    std::lock_guard<std::mutex> lock(mu_);
    auto it = cache_.find(key);
    if (it == cache_.end()) it = cache_.emplace(key, std::make_shared<T>(make())).first;
    return *static_cast<const T*>(it->second.get());
  }

 private:
  std::mutex mu_;
  std::map<std::string, std::shared_ptr<void>> cache_;
};

inline Context& context_of(const KernelContext& c) { return *static_cast<Context*>(c.device); }

// The cuDNN launches a prepared conv2d / conv2d_grad_data / conv2d_grad_weight node runs (its
// PreparedKernel::state): 1, or more where its batch is split (cuda/ops_conv2d.cpp). For tests.
int64_t conv_launches(const void* state);

// Workspace bytes an op needs on the device (cuDNN algorithm workspace); null: none.
using WorkspaceQuery = size_t (*)(Context& ctx, const void* params, std::span<const TensorType> in,
                                  std::span<const TensorType> out);

// Per-node preparation (an op whose kernel keeps state, e.g. cuDNN's algorithm choice): the state
// KernelContext::state will point to, and the exact workspace it runs with.
using PrepareQuery = Prepared (*)(Context& ctx, const void* params, std::span<const TensorType> in,
                                  std::span<const TensorType> out);

struct CudaOp {
  Kernel run = nullptr;
  WorkspaceQuery workspace = nullptr;  // stateless kernels' workspace (null: none)
  PrepareQuery prepare = nullptr;      // stateful kernels (null: no state, `workspace` bytes)
};

// The CUDA kernels of the registered ops, by op name. Filled by cuda/ops_*.cpp through
// MNEMO_REGISTER_CUDA_OPS (the same explicit-call scheme as ops/); building it touches no device,
// so the tests check on any machine that every compute op has a CUDA kernel.
class KernelTable {
 public:
  void add(const std::string& op, CudaOp k);  // throws on a duplicate or an op not in the registry
  const CudaOp* find(const std::string& op) const;
  std::vector<std::string> names() const;

 private:
  std::map<std::string, CudaOp> ops_;
};
const KernelTable& kernel_table();

}  // namespace mnemo::cuda

#define MNEMO_REGISTER_CUDA_OPS(stem) void mnemo_register_cuda_ops_##stem(::mnemo::cuda::KernelTable& table)
