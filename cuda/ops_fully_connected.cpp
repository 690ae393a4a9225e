// CUDA kernels of the fully_connected ops (ops/fully_connected.cpp; PyTorch Linear layout, w[M,D]).
// GEMMs: cuBLAS cublasSgemm on the device's handle (pedantic float32 math, no workspace, no atomics:
// cuda/device.cpp), with the row-major trick: a row-major matrix A[r,c] is the column-major
// matrix A^T (leading dimension c), so row-major C = A B is computed as column-major C^T = B^T A^T.
// Bias add and bias gradient: own deterministic kernels (cuda/kernels/fully_connected.cu).
#include <climits>

#include "cuda/check.h"
#include "cuda/context.h"
#include "cuda/kernels/fully_connected.h"

namespace mnemo::cuda {
namespace {

int as_int(int64_t v, const char* op, const char* what) {
  MNEMO_CHECK(v >= 0 && v <= INT_MAX) << op << ": " << what << " = " << v << " exceeds cuBLAS's int range";
  return static_cast<int>(v);
}

// Column-major C[m,n] = op(A) op(B) (k inner); beta 0: C is overwritten, never read; beta 1: the
// product is added to C. With k == 0 the product is all zeros (set explicitly rather than relying
// on cuBLAS's k == 0 convention).
void sgemm(const KernelContext& c, const char* op, cublasOperation_t ta, cublasOperation_t tb, int64_t m, int64_t n,
           int64_t k, const float* A, int64_t lda, const float* B, int64_t ldb, float* C, int64_t ldc,
           float beta = 0.0f) {
  if (m <= 0 || n <= 0) return;
  Context& ctx = context_of(c);
  if (k <= 0) {
    if (beta == 0.0f) MNEMO_CUDA_CHECK(cudaMemsetAsync(C, 0, static_cast<size_t>(m * n) * sizeof(float), ctx.stream));
    return;
  }
  const float one = 1.0f;
  MNEMO_CUBLAS_CHECK(cublasSgemm(ctx.cublas, ta, tb, as_int(m, op, "m"), as_int(n, op, "n"), as_int(k, op, "k"), &one,
                                 A, as_int(lda, op, "lda"), B, as_int(ldb, op, "ldb"), &beta, C,
                                 as_int(ldc, op, "ldc")));
}

// y[N,M] = x[N,D] w[M,D]^T (+ b[M]):  column-major y^T[M,N] = (w^T)^T[M,D] x^T[D,N].
void fc_forward(const KernelContext& c) {
  const int64_t N = c.in[0].dim(0), D = c.in[0].dim(1), M = c.in[1].dim(0);
  float* y = c.out[0].as<float>();
  sgemm(c, "fully_connected", CUBLAS_OP_T, CUBLAS_OP_N, M, N, D, c.in[1].as<float>(), D, c.in[0].as<float>(), D, y, M);
  if (c.in.size() == 3) fc_bias_add(context_of(c).stream, y, c.in[2].as<float>(), N, M);
}

// dx[N,D] = dy[N,M] w[M,D]:  column-major dx^T[D,N] = w^T[D,M] dy^T[M,N].
void fc_grad_data(const KernelContext& c) {
  const int64_t N = c.in[0].dim(0), M = c.in[0].dim(1), D = c.in[1].dim(1);
  sgemm(c, "fully_connected_grad_data", CUBLAS_OP_N, CUBLAS_OP_N, D, N, M, c.in[1].as<float>(), D,
        c.in[0].as<float>(), M, c.out[0].as<float>(), D);
}

// dw[M,D] = dy[N,M]^T x[N,D] (+ sum[M,D]):  column-major dw^T[D,M] = x^T[D,N] (dy^T[M,N])^T, with
// beta 1 on a copy of the sum (none needed when the planner put dw in the sum's place).
void fc_grad_weight(const KernelContext& c) {
  const int64_t N = c.in[0].dim(0), M = c.in[0].dim(1), D = c.in[1].dim(1);
  float* dw = c.out[0].as<float>();
  float beta = 0.0f;
  if (c.in.size() == 3) {
    const float* sum = c.in[2].as<float>();
    if (sum != dw)
      MNEMO_CUDA_CHECK(cudaMemcpyAsync(dw, sum, static_cast<size_t>(M * D) * sizeof(float), cudaMemcpyDeviceToDevice,
                                       context_of(c).stream));
    beta = 1.0f;
  }
  sgemm(c, "fully_connected_grad_weight", CUBLAS_OP_N, CUBLAS_OP_T, D, M, N, c.in[1].as<float>(), D,
        c.in[0].as<float>(), M, dw, D, beta);
}

// db[M] = sum over n of dy[n,:], rows in order (bitwise the CPU's float sum).
void fc_grad_bias(const KernelContext& c) {
  fc_bias_grad(context_of(c).stream, c.in[0].as<float>(), c.out[0].as<float>(), c.in[0].dim(0), c.in[0].dim(1));
}

}  // namespace
}  // namespace mnemo::cuda

MNEMO_REGISTER_CUDA_OPS(fully_connected) {
  using namespace mnemo::cuda;
  table.add("fully_connected", {fc_forward});
  table.add("fully_connected_grad_data", {fc_grad_data});
  table.add("fully_connected_grad_weight", {fc_grad_weight});
  table.add("fully_connected_grad_bias", {fc_grad_bias});
}
