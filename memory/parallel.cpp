// Independent work items on the OpenMP threads (see parallel.h).
#include "memory/parallel.h"

#include <exception>
#include <vector>

namespace mnemo {

void parallel_each(size_t n, const std::function<void(size_t)>& body) {
  // An exception must not leave an OpenMP region (std::terminate): keep each, rethrow the first after.
  std::vector<std::exception_ptr> errors(n);
#pragma omp parallel for schedule(dynamic)
  for (size_t k = 0; k < n; ++k) {
    try {
      body(k);
    } catch (...) {
      errors[k] = std::current_exception();
    }
  }
  for (const std::exception_ptr& e : errors)
    if (e) std::rethrow_exception(e);
}

}  // namespace mnemo
