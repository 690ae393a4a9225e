// oneDNN pieces shared by the op files that run its primitives (ops/conv2d.cpp,
// ops/fully_connected.cpp): one CPU engine for the process, one stream per thread, and the
// 64-byte aligned base of a planned workspace (oneDNN's kernels may need it; the op reserves
// kOnednnAlign bytes more than its primitives' needs).
#pragma once
#include <cstdint>
#include <oneapi/dnnl/dnnl.hpp>

namespace mnemo::ops {

constexpr int64_t kOnednnAlign = 64;

inline dnnl::engine& onednn_engine() {
  static dnnl::engine eng(dnnl::engine::kind::cpu, 0);
  return eng;
}

inline dnnl::stream& onednn_stream() {
  thread_local dnnl::stream stream(onednn_engine());
  return stream;
}

inline char* onednn_aligned(void* workspace) {
  char* ws = static_cast<char*>(workspace);
  return ws + (kOnednnAlign - static_cast<int64_t>(reinterpret_cast<uintptr_t>(ws) % kOnednnAlign)) % kOnednnAlign;
}

}  // namespace mnemo::ops
