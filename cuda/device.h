// The CUDA device: opens GPU `ordinal`, creates one compute stream, one copy stream and the cuDNN
// and cuBLAS handles, and implements core/device.h on them. Throws a clear mnemo::Error when the
// machine has no usable GPU (no driver, no device, or the ordinal out of range).
#pragma once
#include <memory>

#include "core/device.h"

namespace mnemo::cuda {

std::unique_ptr<Device> open_device(int ordinal);
// Number of usable devices; 0 (never an error) when there is no driver or no GPU. `why` gets the
// runtime's reason for 0.
int device_count(std::string* why = nullptr);

}  // namespace mnemo::cuda
