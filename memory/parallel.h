// Independent work items on the OpenMP threads (the planners' searches).
#pragma once

#include <cstddef>
#include <functional>

namespace mnemo {

// body(0) .. body(n - 1) on the OpenMP threads; the first exception is rethrown after all ran.
void parallel_each(size_t n, const std::function<void(size_t)>& body);

}  // namespace mnemo
