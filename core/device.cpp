// Helpers shared by the devices (see device.h).
#include "core/device.h"

#include <cstring>

#include "core/memory_plan.h"

namespace mnemo {

int64_t staging_bytes(std::span<const TensorType> types) {
  int64_t bytes = 0;
  for (const TensorType& t : types) bytes += align_up(static_cast<int64_t>(t.bytes()));
  return bytes;
}

std::vector<TensorView> pack_inputs(std::span<const TensorView> host, std::span<const TensorType> types, char* dst,
                                    char* base) {
  MNEMO_ASSERT(host.size() == types.size()) << "stage_inputs: " << host.size() << " tensors, reserved " << types.size();
  std::vector<TensorView> out;
  int64_t off = 0;
  for (size_t i = 0; i < host.size(); ++i) {
    MNEMO_ASSERT(host[i].type == types[i]) << "stage_inputs: input " << i << " is " << host[i].type.str() << ", reserved "
                                          << types[i].str();
    std::memcpy(dst + off, host[i].data, host[i].bytes());
    out.push_back(TensorView{base + off, types[i]});
    off += align_up(static_cast<int64_t>(host[i].bytes()));
  }
  return out;
}

}  // namespace mnemo
