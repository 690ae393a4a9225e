// MNEMO_HD: functions callable from device code (under nvcc) and from plain host C++ (the CPU tests
// of the kernels' maths, compiled by g++). Included by the cuda/kernels/*_math.h headers.
#pragma once

#if defined(__CUDACC__)
#define MNEMO_HD __host__ __device__
#else
#define MNEMO_HD
#endif
