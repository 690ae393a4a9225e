// Device selection and device-resident parameters (see device_state.h).
#include "train/device_state.h"

#include "core/host_device.h"
#include "ops/optimizer.h"
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

std::unique_ptr<Device> open_device(const std::string& name, const std::string& what) {
  if (name == "cpu") return nullptr;
  if (name == "host") return make_host_device();
  int ordinal = 0;
  if (name.rfind("cuda:", 0) == 0) {
    const std::string n = name.substr(5);
    MNEMO_CHECK(!n.empty() && n.find_first_not_of("0123456789") == std::string::npos && n.size() < 4)
        << what << ": '" << name << "' is not a device (expected cpu, cuda, cuda:N or host)";
    ordinal = std::stoi(n);
  } else {
    MNEMO_CHECK(name == "cuda") << what << ": '" << name << "' is not a device (expected cpu, cuda, cuda:N or host)";
  }
#ifdef MNEMO_HAVE_CUDA
  return cuda::open_device(ordinal);
#else
  MNEMO_FAIL() << what << " " << name << ": this build of mnemo has no CUDA backend (CMake found no nvcc, cuBLAS or "
               << "cuDNN; see docs/GPU.md); use --device cpu";
#endif
}

std::unique_ptr<Device> open_run_device(const Config& c, const std::string& flag) {
  return flag.empty() ? open_device(c.device, c.file + ": device") : open_device(flag, "--device");
}

DeviceParams::DeviceParams(Device& device, const ParamStore& params, const Sgd* sgd, SgdOptions opt)
    : device_(device), specs_(params), opt_(opt), update_(device.kernel("sgd_update")) {
  std::vector<std::pair<const Tensor*, int64_t>> layout;  // host tensor, offset
  for (const ParamSpec& s : params.specs()) layout.push_back({&params.at(s.name), 0});
  if (sgd)
    for (const Tensor& v : sgd->state()) layout.push_back({&v, 0});
  for (auto& [t, off] : layout) off = bytes_, bytes_ += align_up(static_cast<int64_t>(t->bytes()));
  base_ = static_cast<char*>(device.allocate(bytes_, "the parameters and optimiser state"));
  for (const auto& [t, off] : layout) device.copy(base_ + off, t->data(), static_cast<int64_t>(t->bytes()), CopyKind::host_to_device);
  size_t i = 0;
  for (const ParamSpec& s : params.specs()) params_[s.name] = TensorView{base_ + layout[i++].second, params.at(s.name).type()};
  if (sgd)
    for (const Tensor& v : sgd->state()) velocity_.push_back(TensorView{base_ + layout[i++].second, v.type()});
}

DeviceParams::~DeviceParams() { device_.release(base_); }

void DeviceParams::bind(Executor& ex) const {
  for (const auto& [name, v] : params_) ex.bind(name, v);
}

void DeviceParams::sgd_step(const std::vector<TensorView>& grads, double lr) {
  const ops::SgdParams p{lr, opt_.momentum, opt_.weight_decay};
  size_t j = 0;
  for (const ParamSpec& s : specs_.specs()) {
    if (!s.trainable) continue;
    MNEMO_CHECK(j < grads.size() && j < velocity_.size()) << "sgd: " << grads.size() << " gradients, " << velocity_.size()
                                                          << " velocities for more trainable parameters";
    const TensorView& w = params_.at(s.name);
    MNEMO_CHECK(grads[j].type == w.type) << "sgd: gradient of '" << s.name << "' is " << grads[j].type.str();
    const TensorView in[3] = {w, grads[j], velocity_[j]};
    const TensorView out[2] = {w, velocity_[j]};
    update_(KernelContext{in, out, &p, nullptr, 0, device_.kernel_context()});
    ++j;
  }
  MNEMO_CHECK(j == grads.size()) << "sgd: " << grads.size() << " gradients for " << j << " trainable parameters";
}

void DeviceParams::download(ParamStore& params, Sgd* sgd) const {
  for (const auto& [name, v] : params_)
    device_.copy(params.at(name).data(), v.data, static_cast<int64_t>(v.bytes()), CopyKind::device_to_host);
  if (!sgd) return;
  MNEMO_CHECK(sgd->state().size() == velocity_.size()) << "download: optimiser state sizes differ";
  for (size_t i = 0; i < velocity_.size(); ++i)
    device_.copy(sgd->state()[i].data(), velocity_[i].data, static_cast<int64_t>(velocity_[i].bytes()), CopyKind::device_to_host);
}

}  // namespace mnemo
