// Running on a device (core/device.h) from the training code; the CPU is a device like any other:
//   open_device      "cpu" (also "host") -> the CPU device, "cuda" / "cuda:N" -> the CUDA backend,
//                    with a clear error when this build has none or the machine has no GPU;
//   DeviceParams     the parameters and the optimiser state (SGD velocities, bound to the
//                    training graph's `velocity/<param>` nodes) where the device reads them: on
//                    the CPU the host stores themselves; on a GPU ONE persistent allocation
//                    (parameters first, then velocities), uploaded once and downloaded for
//                    checkpoints and at the end. The update itself is a node of the step.
#pragma once
#include <map>
#include <memory>
#include <string>

#include "core/device.h"
#include "core/executor.h"
#include "train/config/config.h"
#include "train/session/param_store.h"
#include "train/session/sgd.h"

namespace mnemo {

bool cuda_backend_built();
// The GPU a device name means: -1 for "cpu" or "host", N for "cuda:N", 0 for "cuda"; anything else
// is an error naming `what` (the flag or key).
int cuda_ordinal(const std::string& name, const std::string& what = "--device");
// "cpu" or "host" -> the CPU device; "cuda" or "cuda:N" -> an open CUDA device. `what` names the
// flag or key for errors.
std::unique_ptr<Device> open_device(const std::string& name, const std::string& what = "--device");

// The device of a run: the --device flag when given (`flag` not empty), else the config's
// `device` key; errors name the one used.
std::unique_ptr<Device> open_run_device(const Config& c, const std::string& flag);

class DeviceParams {
 public:
  // `sgd`: the optimiser state to bind (velocities), or none for inference / grad runs.
  DeviceParams(Device& device, ParamStore& params, Sgd* sgd);
  ~DeviceParams();
  DeviceParams(const DeviceParams&) = delete;
  DeviceParams& operator=(const DeviceParams&) = delete;

  // Binds every param node of the executor's graph that names a parameter or a velocity.
  void bind(Executor& ex) const;
  void download();  // device -> the host stores (waits); nothing to do on the CPU
  int64_t bytes() const { return bytes_; }  // device memory allocated for them (0 on the CPU)

 private:
  Device& device_;
  ParamStore& params_;
  Sgd* sgd_;
  char* base_ = nullptr;
  int64_t bytes_ = 0;
  std::map<std::string, TensorView> views_;  // node name -> where the device reads it
  std::vector<std::pair<const Tensor*, TensorView>> mirrors_;  // host tensor, its device copy
};

}  // namespace mnemo
