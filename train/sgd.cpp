// SGD update on the CPU.
#include "train/sgd.h"

#include <omp.h>

namespace mnemo {

Sgd::Sgd(const ParamStore& params, SgdOptions opt) : opt_(opt) {
  for (const ParamSpec& s : params.specs()) {
    if (!s.trainable) continue;
    velocity_.emplace_back(params.at(s.name).type());
    velocity_.back().zero();
  }
}

void Sgd::step(ParamStore& params, const std::vector<TensorView>& grads, double lr) {
  size_t k = 0;
  for (const ParamSpec& s : params.specs()) {
    if (!s.trainable) continue;
    MNEMO_CHECK(k < grads.size()) << "sgd: " << grads.size() << " gradients for more trainable parameters";
    Tensor& w = params.at(s.name);
    MNEMO_CHECK(grads[k].type == w.type()) << "sgd: gradient of '" << s.name << "' is " << grads[k].type.str();
    dispatch_float(w.dtype(), "sgd", [&]<class T>() {
      T* wp = w.as<T>();
      T* vp = velocity_[k].as<T>();
      const T* gp = grads[k].as<T>();
      const T mom = static_cast<T>(opt_.momentum), wd = static_cast<T>(opt_.weight_decay), a = static_cast<T>(lr);
      const int64_t n = w.numel();
#pragma omp parallel for schedule(static) if (n > (1 << 16))
      for (int64_t i = 0; i < n; ++i) {
        vp[i] = mom * vp[i] + (gp[i] + wd * wp[i]);
        wp[i] -= a * vp[i];
      }
    });
    ++k;
  }
  MNEMO_CHECK(k == grads.size()) << "sgd: " << grads.size() << " gradients for " << k << " trainable parameters";
}

int64_t Sgd::state_bytes() const {
  int64_t b = 0;
  for (const Tensor& v : velocity_) b += static_cast<int64_t>(v.bytes());
  return b;
}

}  // namespace mnemo
