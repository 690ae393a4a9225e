// NCCL, the device half of a data-parallel run's communicator (docs/PARALLEL.md): the gradient
// gathers of grad_allreduce_start/wait on the device arena, ordered on the step's stream through
// events, run on a communication stream of their own so the backward kernels go on meanwhile.
// One rank per GPU; rank 0 makes the unique id and the run's MPI communicator hands it to the
// others. Built when the CUDA toolkit has NCCL (MNEMO_HAVE_NCCL). Host code only (g++).
#pragma once
#include <memory>
#include <string>

#include "core/comm.h"

namespace mnemo::cuda {

// A new NCCL unique id (bytes to pass to every rank's open_nccl).
std::string nccl_unique_id();
// The communicator of rank `rank` of `size` on GPU `ordinal`.
std::unique_ptr<DeviceGather> open_nccl(const std::string& unique_id, int rank, int size, int ordinal);

}  // namespace mnemo::cuda
