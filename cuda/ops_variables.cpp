// CUDA kernel of the constant op (ops/variables.cpp): fills the output with `value` converted to its
// dtype exactly as the CPU op converts it (static_cast to float / int32; double as is).
#include <cstring>

#include "cuda/context.h"
#include "cuda/kernels/variables.h"
#include "ops/variables.h"

namespace mnemo::cuda {
namespace {

template <class T, class W>
W bits_of(T v) {
  static_assert(sizeof(T) == sizeof(W));
  W w;
  std::memcpy(&w, &v, sizeof(W));
  return w;
}

void constant_k(const KernelContext& c) {
  const auto& p = c.p<ops::VariableParams>();
  const TensorView& y = c.out[0];
  cudaStream_t stream = context_of(c).stream;
  switch (y.dtype()) {
    case DType::f32:
      fill_words(stream, static_cast<uint32_t*>(y.data), y.numel(), bits_of<float, uint32_t>(static_cast<float>(p.value)));
      break;
    case DType::i32:
      fill_words(stream, static_cast<uint32_t*>(y.data), y.numel(),
                 bits_of<int32_t, uint32_t>(static_cast<int32_t>(p.value)));
      break;
    case DType::f64:
      fill_words(stream, static_cast<uint64_t*>(y.data), y.numel(), bits_of<double, uint64_t>(p.value));
      break;
  }
}

}  // namespace
}  // namespace mnemo::cuda

MNEMO_REGISTER_CUDA_OPS(variables) {
  using namespace mnemo::cuda;
  table.add("constant", {constant_k});
}
