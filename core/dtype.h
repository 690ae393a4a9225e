// Element types: float32 (training), float64 (gradient checks), int32 (labels).
#pragma once
#include <cstddef>
#include <cstdint>
#include <string>

#include "core/error.h"

namespace mnemo {

enum class DType : uint8_t { f32, f64, i32 };

inline size_t dtype_size(DType t) { return t == DType::f64 ? 8 : 4; }
inline const char* dtype_name(DType t) {
  switch (t) {
    case DType::f32: return "float32";
    case DType::f64: return "float64";
    case DType::i32: return "int32";
  }
  return "?";
}
inline bool is_float(DType t) { return t == DType::f32 || t == DType::f64; }
DType parse_dtype(const std::string& name);  // "float32"/"f32", "float64"/"f64", "int32"/"i32"

template <class T> constexpr DType dtype_of();
template <> constexpr DType dtype_of<float>() { return DType::f32; }
template <> constexpr DType dtype_of<double>() { return DType::f64; }
template <> constexpr DType dtype_of<int32_t>() { return DType::i32; }

// Calls f.template operator()<T>() for the float type T matching t; throws for other types.
// Kernels use it to instantiate one template for float32 and float64.
template <class F>
decltype(auto) dispatch_float(DType t, const char* who, F&& f) {
  switch (t) {
    case DType::f32: return f.template operator()<float>();
    case DType::f64: return f.template operator()<double>();
    default: MNEMO_FAIL() << who << ": expected float32 or float64, got " << dtype_name(t);
  }
}

}  // namespace mnemo
