// Parameters of the slicing ops (ops/slice_concat.cpp), shared with the CUDA kernels
// (cuda/ops_slice_concat.cpp).
#pragma once
#include <cstdint>
#include <limits>
#include <vector>

#include "core/shape.h"

namespace mnemo::ops {

constexpr int64_t kToEnd = std::numeric_limits<int64_t>::max();  // slice `end` not given

struct SliceParams {
  int64_t axis = 0, begin = 0, end = kToEnd;
};
struct SliceGradParams {
  int64_t axis = 0, begin = 0;
  Shape input_shape;
};
struct SplitParams {
  int64_t axis = 0;
  std::vector<int64_t> sizes;  // empty: `parts` equal pieces
  int64_t parts = 0;
};
struct AxisParams {
  int64_t axis = 0;
};
// stack_rows {begin}; stack_rows_grad {begin, rows}.
struct StackParams {
  int64_t begin = 0, rows = 0;
};

// `axis` in [-rank, rank) as a dimension index; throws naming `op` otherwise.
int normalize_axis(int64_t axis, size_t rank, const char* op);

// A tensor seen as [outer, extent, inner] around `axis` (the slicing ops copy rows of extent x inner).
struct AxisLayout {
  int64_t outer = 1, extent = 1, inner = 1;
};
AxisLayout axis_layout(const Shape& s, int axis);

}  // namespace mnemo::ops
