// CUDA kernels of the data-parallel all-reduce (ops/allreduce.cpp), float32: start copies this
// rank's gradients into its row of the bucket buffer on the step's stream and, with a communicator
// (several ranks, or one under parallel.reduce_one_rank), hands the buffer to the communicator's
// device half (NCCL, cuda/nccl.h), which gathers on a stream of its own; wait makes the step's
// stream wait for that gather and writes the means (cuda/kernels/allreduce.h, summed in rank
// order: the bits of the CPU kernel).
#include "core/comm.h"
#include "cuda/check.h"
#include "cuda/context.h"
#include "cuda/kernels/allreduce.h"

namespace mnemo::cuda {
namespace {

DeviceGather& device_half(Communicator& c, int64_t ranks) {
  MNEMO_CHECK(c.device()) << "this step runs on a GPU over " << ranks << " ranks, but the run's communicator has no "
                          << "device half (NCCL): the build has no NCCL, or the run did not attach it (docs/PARALLEL.md)";
  return *c.device();
}

void start_k(const KernelContext& c) {
  const TensorView& buf = c.out[0];
  MNEMO_CHECK(buf.dtype() == DType::f32) << "grad_allreduce_start on CUDA: float32 only, got " << buf.type.str();
  const int64_t ranks = buf.dim(0), total = buf.dim(1);
  Communicator* comm = communicator_for(ranks);
  const int64_t me = comm ? comm->rank() : 0;
  cudaStream_t stream = context_of(c).stream;
  char* row = static_cast<char*>(buf.data) + static_cast<size_t>(me * total) * sizeof(float);
  for (const TensorView& g : c.in) {
    MNEMO_CUDA_CHECK(cudaMemcpyAsync(row, g.data, g.bytes(), cudaMemcpyDeviceToDevice, stream));
    row += g.bytes();
  }
  if (comm) device_half(*comm, ranks).start(buf.data, total * static_cast<int64_t>(sizeof(float)), stream);
}

void wait_k(const KernelContext& c) {
  const TensorView& buf = c.in[0];
  MNEMO_CHECK(buf.dtype() == DType::f32) << "grad_allreduce_wait on CUDA: float32 only, got " << buf.type.str();
  const int64_t ranks = buf.dim(0), total = buf.dim(1);
  cudaStream_t stream = context_of(c).stream;
  if (Communicator* comm = communicator_for(ranks)) device_half(*comm, ranks).wait(buf.data, stream);
  int64_t off = 0;
  for (const TensorView& o : c.out) {
    mean_of_rows(stream, buf.as<float>() + off, ranks, total, o.as<float>(), o.numel());
    off += o.numel();
  }
}

}  // namespace
}  // namespace mnemo::cuda

MNEMO_REGISTER_CUDA_OPS(allreduce) {
  using namespace mnemo::cuda;
  table.add("grad_allreduce_start", {start_k});
  table.add("grad_allreduce_wait", {wait_k});
}
