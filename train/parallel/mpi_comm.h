// The Open MPI communicator of a data-parallel run (docs/PARALLEL.md). One thread of its own makes
// every MPI call (initialisation, the gradient gathers, the host reductions, finalisation) in the
// order they were asked for, which is the same on every rank; callers wait for a result with a
// timeout, so a rank that died or hangs stops the others with a message instead of a hang.
#pragma once
#include <memory>
#include <string>
#include <vector>

#include "train/parallel/run_comm.h"

namespace mnemo {

class MpiCommunicator final : public RunCommunicator {
 public:
  // The communicator of a process started by mpirun (OMPI_COMM_WORLD_SIZE set), else null.
  // `timeout_s`: how long a wait may take before the run is stopped.
  static std::unique_ptr<MpiCommunicator> open_if_launched(double timeout_s);
  ~MpiCommunicator() override;  // MPI_Finalize; after a timeout, MPI_Abort (stops every rank)
  MpiCommunicator(const MpiCommunicator&) = delete;
  MpiCommunicator& operator=(const MpiCommunicator&) = delete;

  int rank() const override { return rank_; }
  int size() const override { return size_; }
  void start_gather(void* buf, int64_t bytes) override;
  void wait_gather(void* buf, const std::string& what) override;
  // (run_comm.h; the gathers' times are measured on the MPI thread)
  std::vector<double> sum(const std::vector<double>& values, const std::string& what) override;
  std::string broadcast(const std::string& bytes, const std::string& what) override;
  void attach_device(std::unique_ptr<DeviceGather> d) override { device_ = std::move(d); }
  DeviceGather* device() const override { return device_.get(); }
  Stats stats() const override;
  void abandon(const std::string& why) override;
  bool broken() const override;

  struct Impl;

 private:
  explicit MpiCommunicator(double timeout_s);
  std::unique_ptr<Impl> impl_;
  std::unique_ptr<DeviceGather> device_;  // destroyed before impl_ (MPI finalised after NCCL)
  int rank_ = 0, size_ = 1;
};

}  // namespace mnemo
