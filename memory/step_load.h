// Bytes per step of a schedule with range add and range max, each in O(log steps) (a segment tree
// with lazy adds): budget's fills ask, for each of thousands of candidates, the most live bytes
// over an interval of steps and then add the candidate's bytes over it.
#pragma once
#include <algorithm>
#include <climits>
#include <cstdint>
#include <vector>

namespace mnemo {

class StepLoad {
 public:
  explicit StepLoad(const std::vector<int64_t>& live) : n_(std::max<size_t>(1, live.size())), max_(4 * n_, 0), add_(4 * n_, 0) {
    build(1, 0, n_ - 1, live);
  }
  int64_t max(int from, int to) const { return query(1, 0, n_ - 1, from, to); }  // over [from, to]
  void add(int from, int to, int64_t bytes) { update(1, 0, n_ - 1, from, to, bytes); }

 private:
  void build(size_t i, size_t lo, size_t hi, const std::vector<int64_t>& live) {
    if (lo == hi) {
      max_[i] = lo < live.size() ? live[lo] : 0;
      return;
    }
    const size_t mid = (lo + hi) / 2;
    build(2 * i, lo, mid, live), build(2 * i + 1, mid + 1, hi, live);
    max_[i] = std::max(max_[2 * i], max_[2 * i + 1]);
  }
  int64_t query(size_t i, size_t lo, size_t hi, int from, int to) const {
    if (to < static_cast<int>(lo) || from > static_cast<int>(hi)) return INT64_MIN;
    if (from <= static_cast<int>(lo) && static_cast<int>(hi) <= to) return max_[i];
    const size_t mid = (lo + hi) / 2;
    return add_[i] + std::max(query(2 * i, lo, mid, from, to), query(2 * i + 1, mid + 1, hi, from, to));
  }
  void update(size_t i, size_t lo, size_t hi, int from, int to, int64_t bytes) {
    if (to < static_cast<int>(lo) || from > static_cast<int>(hi)) return;
    if (from <= static_cast<int>(lo) && static_cast<int>(hi) <= to) {
      max_[i] += bytes, add_[i] += bytes;
      return;
    }
    const size_t mid = (lo + hi) / 2;
    update(2 * i, lo, mid, from, to, bytes), update(2 * i + 1, mid + 1, hi, from, to, bytes);
    max_[i] = add_[i] + std::max(max_[2 * i], max_[2 * i + 1]);
  }
  size_t n_;
  std::vector<int64_t> max_, add_;  // max over the node's range (its own adds included); adds for the whole range
};

}  // namespace mnemo
