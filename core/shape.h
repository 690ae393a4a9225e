// Shapes: dimensions as int64, row-major (last dimension contiguous). Rank 0 is a scalar.
// Shape letters used across mnemo: N batch, C channels, H/W height/width, K output channels,
// R/S kernel height/width, T time steps, D features.
#pragma once
#include <cstdint>
#include <string>
#include <vector>

namespace mnemo {

using Shape = std::vector<int64_t>;

int64_t numel(const Shape& s);
std::string shape_str(const Shape& s);  // "[64,3,32,32]"

}  // namespace mnemo
