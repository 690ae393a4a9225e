// Running on a device (core/device.h) from the training code:
//   open_device      "cpu" -> null (the CPU), "cuda" / "cuda:N" -> the CUDA backend, with a clear
//                    error when this build has none or the machine has no GPU;
//   DeviceParams     the parameters and the SGD velocities on the device in ONE persistent
//                    allocation (parameters first, then velocities), uploaded from the host stores
//                    once and downloaded for checkpoints and at the end; the update runs there as
//                    the sgd_update op's device kernel.
#pragma once
#include <memory>
#include <string>

#include "core/device.h"
#include "core/executor.h"
#include "train/config.h"
#include "train/param_store.h"
#include "train/sgd.h"

namespace mnemo {

bool cuda_backend_built();
// "cpu" -> nullptr; "cuda" or "cuda:N" -> an open device; "host" -> the host device (the device
// code path on the CPU, core/host_device.h). `what` names the flag or key for errors.
std::unique_ptr<Device> open_device(const std::string& name, const std::string& what = "--device");

// The device of a run: the --device flag when given (`flag` not empty), else the config's
// `device` key; errors name the one used.
std::unique_ptr<Device> open_run_device(const Config& c, const std::string& flag);

class DeviceParams {
 public:
  // `opt`: the optimiser (velocities uploaded from sgd.state()), or none for inference / grad runs.
  DeviceParams(Device& device, const ParamStore& params, const Sgd* sgd, SgdOptions opt = {});
  ~DeviceParams();
  DeviceParams(const DeviceParams&) = delete;
  DeviceParams& operator=(const DeviceParams&) = delete;

  void bind(Executor& ex) const;  // binds every param node of the executor's graph by name
  // One SGD step with learning rate `lr`; grads as for Sgd::step (device memory).
  void sgd_step(const std::vector<TensorView>& grads, double lr);
  void download(ParamStore& params, Sgd* sgd) const;  // device -> host stores (waits)
  int64_t bytes() const { return bytes_; }

 private:
  Device& device_;
  const ParamStore& specs_;
  SgdOptions opt_;
  Kernel update_;  // the sgd_update op's kernel on this device
  char* base_ = nullptr;
  int64_t bytes_ = 0;
  std::map<std::string, TensorView> params_;
  std::vector<TensorView> velocity_;  // trainable parameters in spec order
};

}  // namespace mnemo
