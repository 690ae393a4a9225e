// The CPU device: core/device.h on host memory with the ops' CPU kernels. Every CPU run goes
// through it (`--device cpu`, the default; `host` is an older name for the same device), so the
// CPU takes exactly the path a GPU run takes: planned kernels prepared once, one arena
// allocation, parameters and optimiser state bound where the device reads them, staged inputs.
// Parameters need no copy here (host_memory()).
#pragma once
#include <memory>

#include "core/device.h"

namespace mnemo {

std::unique_ptr<Device> make_cpu_device();

}  // namespace mnemo
