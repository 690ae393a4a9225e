// Shapes, dtype names and owning tensors.
#include "core/tensor.h"

#include <algorithm>
#include <cstdlib>
#include <sstream>

#include "core/memory_plan.h"

namespace mnemo {

DType parse_dtype(const std::string& n) {
  if (n == "float32" || n == "f32") return DType::f32;
  if (n == "float64" || n == "f64") return DType::f64;
  if (n == "int32" || n == "i32") return DType::i32;
  MNEMO_FAIL() << "unknown dtype '" << n << "' (expected float32, float64 or int32)";
}

int64_t numel(const Shape& s) {
  int64_t n = 1;
  bool big = false;
  for (int64_t d : s) {
    MNEMO_CHECK(d >= 0) << "shape " << shape_str(s) << " has a negative dimension";
    if (d == 0) return 0;
    if (big || __builtin_mul_overflow(n, d, &n) || n > kMaxElements) big = true;
  }
  MNEMO_CHECK(!big) << "shape " << shape_str(s) << " has more than 2^40 elements (the largest tensor mnemo plans)";
  return n;
}

std::string shape_str(const Shape& s) {
  std::ostringstream os;
  os << '[';
  for (size_t i = 0; i < s.size(); ++i) os << (i ? "," : "") << s[i];
  os << ']';
  return os.str();
}

std::string TensorType::str() const { return std::string(dtype_name(dtype)) + shape_str(shape); }

void Tensor::Free::operator()(void* p) const { std::free(p); }

Tensor::Tensor(TensorType type) : type_(std::move(type)) {
  for (int64_t d : type_.shape) MNEMO_CHECK(d >= 0) << "negative dimension in " << type_.str();
  // Aligned like the arena's buffers: a host run binds the data loader's batch tensors as the
  // step's inputs, so they must be placed as the planned buffers would be.
  const size_t bytes = static_cast<size_t>(align_up(std::max<int64_t>(static_cast<int64_t>(type_.bytes()), 1)));
  void* p = std::aligned_alloc(static_cast<size_t>(kArenaAlignment), bytes);
  MNEMO_CHECK(p) << "out of memory allocating " << bytes << " bytes for " << type_.str();
  data_.reset(p);
}

}  // namespace mnemo
