// CUDA kernels of the fully_connected ops (ops/fully_connected.cpp; PyTorch Linear layout, w[M,D]).
// GEMMs: cuBLAS cublasSgemm on the device's handle (pedantic float32 math, no workspace, no atomics:
// cuda/device.cpp), with the row-major trick: a row-major matrix A[r,c] is the column-major
// matrix A^T (leading dimension c), so row-major C = A B is computed as column-major C^T = B^T A^T.
// Bias add and bias gradient: own deterministic kernels (cuda/kernels/fully_connected.cu).
// Also the fused head's linear_cross_entropy (ops/softmax_cross_entropy.cpp): per chunk of rows the
// logits by cuBLAS into the workspace, the rows' losses and gradients there
// (cuda/kernels/softmax_cross_entropy.cu), then dx and dw by cuBLAS, as the CPU op does.
#include <algorithm>
#include <climits>

#include "cuda/check.h"
#include "cuda/context.h"
#include "cuda/kernels/fully_connected.h"
#include "cuda/kernels/softmax_cross_entropy.h"

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

// linear_cross_entropy's logits per chunk: rows at a time so that a chunk holds about this many
// (4 MiB of float32; the CPU op's chunks are a quarter of that, for its caches), at least one row.
constexpr int64_t kLceChunkElements = int64_t{1} << 20;
int64_t lce_chunk(int64_t rows, int64_t classes) { return std::clamp<int64_t>(kLceChunkElements / classes, 1, rows); }
// The workspace: a chunk's logits, every row's loss, a chunk's row statistics (max, sum).
int64_t lce_workspace_floats(int64_t rows, int64_t classes) {
  const int64_t chunk = lce_chunk(rows, classes);
  return chunk * classes + rows + 2 * chunk;
}
size_t lce_workspace(Context&, const void*, std::span<const TensorType> in, std::span<const TensorType>) {
  return static_cast<size_t>(lce_workspace_floats(in[0].shape.at(0), in[1].shape.at(0))) * sizeof(float);
}

// in: x[N,D], w[C,D], b[C], labels[N]  out: loss[], dx[N,D], dw[C,D], db[C] (the gradients for
// dloss = 1). Per chunk of n rows: z = x w^T + b, its rows' losses and z = dz in place, db (+)= the
// rows of dz, dx = dz w, dw (+)= dz^T x; then the loss, the row losses summed in row order / N.
void linear_loss(const KernelContext& c) {
  const char* op = "linear_cross_entropy";
  const int64_t N = c.in[0].dim(0), D = c.in[0].dim(1), C = c.in[1].dim(0);
  const int64_t chunk = lce_chunk(N, C), need = lce_workspace_floats(N, C);
  MNEMO_CHECK(c.workspace && c.workspace_bytes >= static_cast<size_t>(need) * sizeof(float))
      << op << ": workspace of " << c.workspace_bytes << " bytes, need " << need * static_cast<int64_t>(sizeof(float));
  float* z = static_cast<float*>(c.workspace);
  float* row_losses = z + chunk * C;
  float* stats = row_losses + N;
  const float *x = c.in[0].as<float>(), *w = c.in[1].as<float>(), *b = c.in[2].as<float>();
  const int32_t* labels = c.in[3].as<int32_t>();
  float *dx = c.out[1].as<float>(), *dw = c.out[2].as<float>(), *db = c.out[3].as<float>();
  const float scale = 1.0f / static_cast<float>(N);
  cudaStream_t stream = context_of(c).stream;
  for (int64_t r0 = 0; r0 < N; r0 += chunk) {
    const int64_t n = std::min(chunk, N - r0);
    const float* xr = x + r0 * D;
    sgemm(c, op, CUBLAS_OP_T, CUBLAS_OP_N, C, n, D, w, D, xr, D, z, C);  // z[n,C] = xr w^T (fc_forward's)
    fc_bias_add(stream, z, b, n, C);
    lce_rows(stream, z, labels + r0, row_losses + r0, stats, n, C, scale);
    fc_bias_grad(stream, z, db, n, C, r0 > 0);
    sgemm(c, op, CUBLAS_OP_N, CUBLAS_OP_N, D, n, C, w, D, z, C, dx + r0 * D, D);  // dx[n,D] = dz w (fc_grad_data's)
    sgemm(c, op, CUBLAS_OP_N, CUBLAS_OP_T, D, C, n, xr, D, z, C, dw, D, r0 > 0 ? 1.0f : 0.0f);  // dw (+)= dz^T xr
  }
  lce_total(stream, row_losses, c.out[0].as<float>(), N, scale);
}

// in: dx, dw, db, dloss[]  out: each times dloss (in place or not).
void linear_loss_grad(const KernelContext& c) {
  for (int k = 0; k < 3; ++k)
    scale_by(context_of(c).stream, c.in[k].as<float>(), c.in[3].as<float>(), c.out[k].as<float>(), c.in[k].numel());
}

}  // namespace
}  // namespace mnemo::cuda

MNEMO_REGISTER_CUDA_OPS(fully_connected) {
  using namespace mnemo::cuda;
  table.add("fully_connected", {fc_forward});
  table.add("fully_connected_grad_data", {fc_grad_data});
  table.add("fully_connected_grad_weight", {fc_grad_weight});
  table.add("fully_connected_grad_bias", {fc_grad_bias});
  table.add("linear_cross_entropy", {linear_loss, lce_workspace});
  table.add("linear_cross_entropy_grad", {linear_loss_grad});
}
