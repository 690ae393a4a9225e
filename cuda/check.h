// Checked calls into the CUDA runtime, cuDNN and cuBLAS: every call's status is tested and a
// failure becomes a mnemo::Error naming the call and the library's message (MNEMO_FAIL adds file:line).
// After each kernel launch MNEMO_CUDA_LAUNCHED() reads cudaGetLastError (launch-configuration errors).
#pragma once
#include <cublas_v2.h>
#include <cuda_runtime_api.h>
#include <cudnn.h>

#include "core/error.h"

namespace mnemo::cuda {

const char* cublas_status_name(cublasStatus_t s);

}  // namespace mnemo::cuda

#define MNEMO_CUDA_CHECK(call)                                                                              \
  do {                                                                                                      \
    const cudaError_t mnemo_e_ = (call);                                                                    \
    if (mnemo_e_ != cudaSuccess)                                                                            \
      MNEMO_FAIL() << #call << " failed: " << cudaGetErrorName(mnemo_e_) \
                   << " (" << cudaGetErrorString(mnemo_e_) << ")";                                          \
  } while (0)

#define MNEMO_CUDNN_CHECK(call)                                                                  \
  do {                                                                                           \
    const cudnnStatus_t mnemo_s_ = (call);                                                       \
    if (mnemo_s_ != CUDNN_STATUS_SUCCESS)                                                        \
      MNEMO_FAIL() << #call << " failed: "              \
                   << cudnnGetErrorString(mnemo_s_);                                             \
  } while (0)

#define MNEMO_CUBLAS_CHECK(call)                                                                 \
  do {                                                                                           \
    const cublasStatus_t mnemo_s_ = (call);                                                      \
    if (mnemo_s_ != CUBLAS_STATUS_SUCCESS)                                                       \
      MNEMO_FAIL() << #call << " failed: "              \
                   << ::mnemo::cuda::cublas_status_name(mnemo_s_);                              \
  } while (0)

// After a <<<...>>> launch (inside the launcher functions of cuda/kernels/*.cu).
#define MNEMO_CUDA_LAUNCHED() MNEMO_CUDA_CHECK(cudaGetLastError())
