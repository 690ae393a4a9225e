// The host device: core/device.h implemented on host memory with the CPU kernels. It runs exactly
// the code path a GPU run takes (device arena, device-resident parameters and SGD, staged inputs,
// fetch) on any machine, so CI tests that path without a GPU: with it, results must be bitwise
// those of the plain CPU path. `mnemo ... --device host` selects it.
#pragma once
#include <memory>

#include "core/device.h"

namespace mnemo {

std::unique_ptr<Device> make_host_device();

}  // namespace mnemo
