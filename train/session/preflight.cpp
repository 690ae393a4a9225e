// Pre-flight memory check (see preflight.h).
#include "train/session/preflight.h"

#include <algorithm>
#include <fstream>
#include <sstream>

namespace mnemo {
namespace {

// A number from a file holding one (cgroup files); -1 when absent or "max".
int64_t read_number(const std::string& path) {
  std::ifstream in(path);
  std::string s;
  if (!(in >> s) || s == "max") return -1;
  try {
    return std::stoll(s);
  } catch (...) {
    return -1;
  }
}

}  // namespace

MemoryAvailable host_memory_available() {
  MemoryAvailable a;
  std::ifstream in("/proc/meminfo");
  for (std::string line; std::getline(in, line);)
    if (line.rfind("MemAvailable:", 0) == 0) {
      std::istringstream ls(line.substr(13));
      int64_t kib = 0;
      if (ls >> kib) a = {kib * 1024, "MemAvailable"};
    }
  // cgroup v2, then v1: the limit minus what the group uses now.
  for (const auto& [limit_file, usage_file] :
       {std::pair<const char*, const char*>{"/sys/fs/cgroup/memory.max", "/sys/fs/cgroup/memory.current"},
        {"/sys/fs/cgroup/memory/memory.limit_in_bytes", "/sys/fs/cgroup/memory/memory.usage_in_bytes"}}) {
    const int64_t limit = read_number(limit_file), usage = read_number(usage_file);
    if (limit <= 0 || usage < 0 || limit > (int64_t{1} << 60)) continue;
    // The usage counts page cache the kernel reclaims on demand: subtract its inactive part, as
    // container tools do (memory.stat: inactive_file, cgroup v1: total_inactive_file).
    int64_t reclaimable = 0;
    const std::string stat = std::string(limit_file).substr(0, std::string(limit_file).rfind('/')) + "/memory.stat";
    std::ifstream st(stat);
    for (std::string key; st >> key;) {
      int64_t v = 0;
      if (!(st >> v)) break;
      if (key == "inactive_file" || key == "total_inactive_file") reclaimable = std::max(reclaimable, v);
    }
    const int64_t used = std::max<int64_t>(0, usage - reclaimable);
    const int64_t left = std::max<int64_t>(0, limit - used);
    if (a.bytes < 0 || left < a.bytes) a = {left, std::string("the cgroup limit (") + limit_file + ")"};
    break;
  }
  return a;
}

MemoryAvailable memory_available(const Device& device) {
  if (device.host_memory()) return host_memory_available();
  const int64_t free = device.memory_free();
  return {free, free >= 0 ? "the device's free memory" : ""};
}

void check_fits(const MirrorResult& mr, int64_t extra, const MemoryAvailable& avail, const Config& c, const Pipeline& p,
                const Device& device, bool force) {
  const MemoryReport& r = mr.planned.report;
  const int64_t need = r.total_bytes + extra;
  if (force || avail.bytes < 0 || need <= avail.bytes) return;
  std::ostringstream os;
  os << "the planned step does not fit: mode " << r.mode << " needs " << format_bytes(need) << " (arena "
     << format_bytes(r.arena_bytes) << ", parameters " << format_bytes(r.param_bytes) << ", optimizer "
     << format_bytes(r.optimizer_bytes) << ", inputs " << format_bytes(r.input_bytes) << ", staging and prefetch "
     << format_bytes(extra) << "), but " << format_bytes(avail.bytes) << " is available (" << avail.source << ") on "
     << device.name() << ".";
  // Other modes, planned exactly (only now: the check has already failed).
  std::string fits;
  for (const char* m : {"share", "sublinear", "optimal", "recursive"}) {
    if (m == r.mode) continue;
    const MemoryReport o = plan_pipeline(c, p, m, &device, mr.training.lr >= 0).planned.report;
    if (o.total_bytes + extra <= avail.bytes) fits += (fits.empty() ? "" : ", ") + std::string(m) + " (" + format_bytes(o.total_bytes) + ")";
  }
  os << (fits.empty() ? " No other memory mode fits either." : " Memory modes that fit: " + fits + " (--memory MODE).");
  // The arena and the inputs scale with the batch, parameters and optimiser state do not.
  const int64_t fixed = r.param_bytes + r.optimizer_bytes, per_batch = r.arena_bytes + r.input_bytes + extra;
  if (avail.bytes > fixed && per_batch > 0 && c.data.batch > 1) {
    const int64_t b = static_cast<int64_t>(static_cast<double>(c.data.batch) * static_cast<double>(avail.bytes - fixed) /
                                           static_cast<double>(per_batch));
    if (b >= 1) os << " In mode " << r.mode << " a batch of about " << b << " would fit (data.batch; now " << c.data.batch << ").";
  }
  os << " Use --force to try anyway.";
  throw Error(os.str());
}

}  // namespace mnemo
