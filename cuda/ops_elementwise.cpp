// CUDA kernels of ops/elementwise.cpp: add, mul, add_n (float32, same shapes: no broadcasting, as
// the CPU op; in place on input 0, and input 1 for add/mul) and copy (any dtype, a device copy).
#include <vector>

#include "cuda/check.h"
#include "cuda/context.h"
#include "cuda/kernels/elementwise.h"

namespace mnemo::cuda {
namespace {

void add_k(const KernelContext& c) {
  add(context_of(c).stream, c.in[0].as<float>(), c.in[1].as<float>(), c.out[0].as<float>(), c.out[0].numel());
}

void mul_k(const KernelContext& c) {
  mul(context_of(c).stream, c.in[0].as<float>(), c.in[1].as<float>(), c.out[0].as<float>(), c.out[0].numel());
}

void add_n_k(const KernelContext& c) {
  std::vector<const float*> x;
  for (const TensorView& t : c.in) x.push_back(t.as<float>());
  add_n(context_of(c).stream, x.data(), static_cast<int>(x.size()), c.out[0].as<float>(), c.out[0].numel());
}

void copy_k(const KernelContext& c) {
  const size_t bytes = c.out[0].bytes();
  if (bytes == 0 || c.out[0].data == c.in[0].data) return;
  MNEMO_CUDA_CHECK(
      cudaMemcpyAsync(c.out[0].data, c.in[0].data, bytes, cudaMemcpyDeviceToDevice, context_of(c).stream));
}

}  // namespace
}  // namespace mnemo::cuda

MNEMO_REGISTER_CUDA_OPS(elementwise) {
  using namespace mnemo::cuda;
  table.add("add", {add_k});
  table.add("mul", {mul_k});
  table.add("add_n", {add_n_k});
  table.add("copy", {copy_k});
}
