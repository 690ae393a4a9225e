// What the CLI reports of fully_connected, and its products for other ops (ops/fully_connected.cpp).
#pragma once
#include <cstdint>

namespace mnemo::ops {

// The library of fully_connected's float32 backward products in this process: "MKL" in a build
// with MKL (scripts/build.sh) on an Intel CPU or under MNEMO_CPU_GEMM=mkl, "MKL accumulating,
// oneDNN overwriting" in such a build on other CPUs, "oneDNN" in a build without MKL or under
// MNEMO_CPU_GEMM=onednn. Throws a
// mnemo::Error naming MNEMO_CPU_GEMM when it holds anything but mkl or onednn, or mkl in a build
// without MKL.
const char* cpu_gemm_library();

// For other ops built of fully_connected's products (the fused linear_cross_entropy):
// row-major C[M,N] = op(A) op(B) (+ C when `accumulate`) on the libraries of fully_connected's
// backward products (float32: MKL's or oneDNN's sgemm by the same rule, use_mkl; float64: Eigen).
// ta / tb: A / B stored transposed ([K,M] / [N,K]).
void fc_gemm(bool ta, bool tb, int64_t M, int64_t N, int64_t K, const float* A, const float* B, float* C, bool accumulate);
void fc_gemm(bool ta, bool tb, int64_t M, int64_t N, int64_t K, const double* A, const double* B, double* C, bool accumulate);
// db[j] (+ db[j] when `accumulate`) = sum over rows i of dy[i, j] for dy [n, m], added in row order
// whatever the threads (fully_connected_grad_bias's sums).
void fc_bias_sums(const float* dy, int64_t n, int64_t m, float* db, bool accumulate);
void fc_bias_sums(const double* dy, int64_t n, int64_t m, double* db, bool accumulate);

}  // namespace mnemo::ops
