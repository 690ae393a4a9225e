// Shapes: dimensions as int64, row-major (last dimension contiguous). Rank 0 is a scalar.
// Shape letters used across mnemo: N batch, C channels, H/W height/width, K output channels,
// R/S kernel height/width, T time steps, D features.
#pragma once
#include <cstdint>
#include <string>
#include <vector>

namespace mnemo {

using Shape = std::vector<int64_t>;

// The most elements one tensor may have (2^40, ~1.1e12: 4 TiB of float32). Every size computed
// from shapes (bytes, sums of buffers, plan totals) stays far from int64 overflow below it.
constexpr int64_t kMaxElements = int64_t{1} << 40;
// The product of the dimensions; throws naming the shape when a dimension is negative or the
// product exceeds kMaxElements (checked arithmetic: no wrap-around to a small or negative size).
int64_t numel(const Shape& s);
std::string shape_str(const Shape& s);  // "[64,3,32,32]"

}  // namespace mnemo
