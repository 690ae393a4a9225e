// Collective communication between the processes of a data-parallel run (docs/PARALLEL.md).
// Core declares the interface the all-reduce kernels (ops/allreduce.cpp) call; the run installs an
// implementation (train/parallel/mpi_comm.h: Open MPI) before its first step. Without one, only
// single-rank steps run.
#pragma once
#include <cstdint>
#include <string>

namespace mnemo {

// The device half of a communicator (cuda/nccl.h: NCCL on the device arena): gathers ordered on a
// device stream instead of the host. `stream` is the step's stream (cudaStream_t).
class DeviceGather {
 public:
  virtual ~DeviceGather() = default;
  // Starts the gather of `buf` (device memory, as Communicator::start_gather) after the work
  // queued on `stream` so far; returns at once.
  virtual void start(void* buf, int64_t bytes, void* stream) = 0;
  // Makes the work queued on `stream` from now on wait for the gather of `buf`.
  virtual void wait(void* buf, void* stream) = 0;
  // Ends every gather still running (on a timeout: a rank died or hangs); the communicator
  // cannot be used afterwards.
  virtual void abort() = 0;
};

class Communicator {
 public:
  virtual ~Communicator() = default;
  virtual int rank() const = 0;
  virtual int size() const = 0;
  // Starts gathering `bytes` bytes from every rank into `buf` (rank r's part at r * bytes; this
  // rank's part must already be there) and returns at once; `buf` must stay untouched until
  // wait_gather(buf) returns. Gathers complete in the order they were started.
  virtual void start_gather(void* buf, int64_t bytes) = 0;
  // Waits for the gather started on `buf`; throws mnemo::Error (naming this rank and `what`)
  // when it does not complete within the communicator's timeout.
  virtual void wait_gather(void* buf, const std::string& what) = 0;
  // The device half, when the run's step is on a device (null: host only).
  virtual DeviceGather* device() const { return nullptr; }
};

// The process's communicator (null: none installed). The run that installs one keeps it alive
// while any step can run and removes it (set_communicator(nullptr)) before destroying it.
void set_communicator(Communicator* c);
Communicator* communicator();
// The communicator a step planned for `ranks` ranks gathers with. For `ranks` > 1 the installed
// one, which must have that many ranks (else mnemo::Error, saying to run under mpirun with that
// many processes); for one rank, the installed communicator when it has one rank (a run with
// parallel.reduce_one_rank, which measures the reduction path), else null (nothing to gather).
Communicator* communicator_for(int64_t ranks);

}  // namespace mnemo
