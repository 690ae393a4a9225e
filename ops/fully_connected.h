// What the CLI reports of fully_connected (ops/fully_connected.cpp).
#pragma once

namespace mnemo::ops {

// The library of fully_connected's float32 backward products in this process: "MKL" in a build
// with MKL (scripts/build.sh) on an Intel CPU or under MNEMO_CPU_GEMM=mkl, "MKL accumulating,
// oneDNN overwriting" in such a build on other CPUs, "oneDNN" in a build without MKL or under
// MNEMO_CPU_GEMM=onednn. Throws a
// mnemo::Error naming MNEMO_CPU_GEMM when it holds anything but mkl or onednn, or mkl in a build
// without MKL.
const char* cpu_gemm_library();

}  // namespace mnemo::ops
