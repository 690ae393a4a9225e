// Small statistics over measured times and rates, shared by `mnemo bench` and tools/bench_ops.
#pragma once
#include <algorithm>
#include <limits>
#include <vector>

namespace mnemo {

// The median: the middle value of an odd count, the mean of the middle two of an even count
// (as numpy.median and Python's statistics.median); NaN for none.
inline double median(std::vector<double> v) {
  if (v.empty()) return std::numeric_limits<double>::quiet_NaN();
  const size_t mid = v.size() / 2;
  std::nth_element(v.begin(), v.begin() + mid, v.end());
  if (v.size() % 2) return v[mid];
  const double upper = v[mid];
  const double lower = *std::max_element(v.begin(), v.begin() + mid);  // (the largest below the middle)
  return (lower + upper) / 2;
}

}  // namespace mnemo
