// Pre-flight memory check: before anything large is allocated (parameters, arena, staging), the
// planned total of the step is compared with the memory the device has available (on the CPU the
// lesser of MemAvailable and the cgroup's limit; on a GPU its free memory). A step that does not
// fit is refused with the plan's figures, the memory modes that would fit and a batch that would,
// instead of allocating until the kernel's OOM killer ends the process. `--force` skips it.
#pragma once
#include <cstdint>
#include <string>

#include "core/device.h"
#include "memory/mirror_planner.h"
#include "train/config/config.h"
#include "train/session/pipeline.h"

namespace mnemo {

struct MemoryAvailable {
  int64_t bytes = -1;   // -1: unknown (the check is skipped)
  std::string source;   // e.g. "MemAvailable", "cgroup memory.max", "cudaMemGetInfo free"
};
// What `device` can still give this process; the CPU's from /proc/meminfo and the cgroup files.
MemoryAvailable memory_available(const Device& device);
MemoryAvailable host_memory_available();

// Throws when the step of `mr` (plus `extra` bytes of input staging and prefetch) needs more than
// `avail`; the message names the plan's figures, the memory modes that fit (planned for `device`)
// and the largest batch estimated to fit. Does nothing when `force` or the amount is unknown.
void check_fits(const MirrorResult& mr, int64_t extra, const MemoryAvailable& avail, const Config& c, const Pipeline& p,
                const Device& device, bool force);

}  // namespace mnemo
