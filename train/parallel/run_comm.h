// What a training run asks of its communicator beyond the gradient gathers (docs/PARALLEL.md):
// host reductions (the loss, failures, the plans' fingerprints), a broadcast (NCCL's unique id),
// the device half and the communication times. Two implementations: MpiCommunicator
// (train/parallel/mpi_comm.h, a run under mpirun) and OneRankCommunicator (below).
#pragma once
#include <memory>
#include <string>
#include <vector>

#include "core/comm.h"

namespace mnemo {

class RunCommunicator : public Communicator {
 public:
  // Element-wise sum over the ranks, in rank order (every rank gets the same bits).
  virtual std::vector<double> sum(const std::vector<double>& values, const std::string& what) = 0;
  // Rank 0's `bytes` on every rank (the NCCL communicator's unique id).
  virtual std::string broadcast(const std::string& bytes, const std::string& what) = 0;
  // The device half (NCCL, cuda/nccl.h) for a run whose step is on a GPU.
  virtual void attach_device(std::unique_ptr<DeviceGather> d) = 0;
  // Time spent so far: in the gradient gathers (from a gather's start to its end, off the step's
  // thread) and waiting for them in wait_gather (the part the compute did not hide).
  struct Stats {
    int64_t gathers = 0;
    double gather_s = 0, waited_s = 0;
  };
  virtual Stats stats() const = 0;
  // After a timeout outside the communicator (a GPU step waiting in NCCL; `why` says so): aborts
  // the device half and marks the run broken, so the communicator stops every rank when it is
  // destroyed instead of finalising with ranks that hang (under MPI it writes `why` to stderr
  // first, as its own timeouts do: the abort may end the process before the caller prints it).
  // `broken()`: whether that (or a timeout of its own) happened.
  virtual void abandon(const std::string& why) = 0;
  virtual bool broken() const = 0;
};

// One rank without MPI: what parallel.reduce_one_rank gives a run not started by mpirun. Its step
// keeps the all-reduce nodes (copies into the bucket buffer, the mean over one row) and, on a GPU,
// their NCCL gathers over one rank: the overhead of the reduction path, measured without MPI. On
// the host a gather has nothing to move (it only counts); reductions return their input.
class OneRankCommunicator final : public RunCommunicator {
 public:
  int rank() const override { return 0; }
  int size() const override { return 1; }
  void start_gather(void*, int64_t) override { ++stats_.gathers; }
  void wait_gather(void*, const std::string&) override {}
  DeviceGather* device() const override { return device_.get(); }
  std::vector<double> sum(const std::vector<double>& values, const std::string&) override { return values; }
  std::string broadcast(const std::string& bytes, const std::string&) override { return bytes; }
  void attach_device(std::unique_ptr<DeviceGather> d) override { device_ = std::move(d); }
  Stats stats() const override { return stats_; }
  void abandon(const std::string&) override {
    if (device_) device_->abort();
    broken_ = true;
  }
  bool broken() const override { return broken_; }

 private:
  bool broken_ = false;
  std::unique_ptr<DeviceGather> device_;
  Stats stats_;
};

}  // namespace mnemo
