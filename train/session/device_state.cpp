// Device selection and device-resident parameters (see device_state.h).
#include "train/session/device_state.h"

#include "core/cpu_device.h"
#ifdef MNEMO_HAVE_CUDA
#include "cuda/device.h"
#endif

namespace mnemo {

bool cuda_backend_built() {
#ifdef MNEMO_HAVE_CUDA
  return true;
#else
  return false;
#endif
}

int cuda_ordinal(const std::string& name, const std::string& what) {
  if (name == "cpu" || name == "host") return -1;
  if (name.rfind("cuda:", 0) == 0) {
    const std::string n = name.substr(5);
    MNEMO_CHECK(!n.empty() && n.find_first_not_of("0123456789") == std::string::npos && n.size() < 4)
        << what << ": '" << name << "' is not a device (expected cpu, cuda, cuda:N or host)";
    return std::stoi(n);
  }
  MNEMO_CHECK(name == "cuda") << what << ": '" << name << "' is not a device (expected cpu, cuda, cuda:N or host)";
  return 0;
}

std::unique_ptr<Device> open_device(const std::string& name, const std::string& what) {
  const int ordinal = cuda_ordinal(name, what);
  if (ordinal < 0) return make_cpu_device();
#ifdef MNEMO_HAVE_CUDA
  return cuda::open_device(ordinal);
#else
  (void)ordinal;
  MNEMO_FAIL() << what << " " << name << ": this build of mnemo has no CUDA backend (CMake found no nvcc, cuBLAS or "
               << "cuDNN; see docs/GPU.md); use --device cpu";
#endif
}

std::unique_ptr<Device> open_run_device(const Config& c, const std::string& flag) {
  return flag.empty() ? open_device(c.device, c.file + ": device") : open_device(flag, "--device");
}

DeviceParams::DeviceParams(Device& device, ParamStore& params, Sgd* sgd) : device_(device), params_(params), sgd_(sgd) {
  std::vector<std::pair<std::string, Tensor*>> all;  // node name, host tensor
  for (const ParamSpec& s : params.specs()) all.push_back({s.name, &params.at(s.name)});
  if (sgd) {
    size_t k = 0;
    for (const ParamSpec& s : params.specs())
      if (s.trainable) all.push_back({"velocity/" + s.name, &sgd->state().at(k++)});
  }
  if (device.host_memory()) {  // the device reads the host stores themselves
    for (const auto& [name, t] : all) views_[name] = t->view();
    return;
  }
  std::vector<int64_t> offsets;
  for (const auto& [name, t] : all) offsets.push_back(bytes_), bytes_ += align_up(static_cast<int64_t>(t->bytes()));
  base_ = static_cast<char*>(device.allocate(bytes_, "the parameters and optimiser state"));
  try {
    for (size_t i = 0; i < all.size(); ++i) {
      const Tensor* t = all[i].second;
      const TensorView v{base_ + offsets[i], t->type()};
      device.copy(v.data, t->data(), static_cast<int64_t>(t->bytes()), CopyKind::host_to_device);
      views_[all[i].first] = v;
      mirrors_.push_back({t, v});
    }
  } catch (...) {  // the destructor does not run when the constructor throws
    device.release(base_);
    throw;
  }
}

DeviceParams::~DeviceParams() { device_.release(base_); }

void DeviceParams::bind(Executor& ex) const {
  const Graph& g = ex.graph();
  for (size_t i = 0; i < g.size(); ++i) {
    const Node& n = g.node(static_cast<int>(i));
    if (!n.is(OpKind::param)) continue;
    auto it = views_.find(n.name);
    MNEMO_ASSERT(it != views_.end()) << "param node '" << n.name << "' has no storage"
                                     << (sgd_ ? "" : " (a graph with optimiser state bound without it)");
    ex.bind(static_cast<int>(i), it->second);
  }
}

void DeviceParams::download() {
  for (const auto& [host, v] : mirrors_)
    device_.copy(const_cast<Tensor*>(host)->data(), v.data, static_cast<int64_t>(v.bytes()), CopyKind::device_to_host);
}

}  // namespace mnemo
