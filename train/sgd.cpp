// SGD update on the CPU: the sgd_update op (ops/optimizer.cpp) per trainable parameter, in place.
#include "train/sgd.h"

#include "ops/optimizer.h"

namespace mnemo {

Sgd::Sgd(const ParamStore& params, SgdOptions opt) : opt_(opt) {
  for (const ParamSpec& s : params.specs()) {
    if (!s.trainable) continue;
    velocity_.emplace_back(params.at(s.name).type());
    velocity_.back().zero();
  }
}

void Sgd::step(ParamStore& params, const std::vector<TensorView>& grads, double lr) {
  static const Kernel update = op_registry().get("sgd_update").cpu;  // the op every backend implements
  const ops::SgdParams p{lr, opt_.momentum, opt_.weight_decay};
  size_t k = 0;
  for (const ParamSpec& s : params.specs()) {
    if (!s.trainable) continue;
    MNEMO_CHECK(k < grads.size()) << "sgd: " << grads.size() << " gradients for more trainable parameters";
    Tensor& w = params.at(s.name);
    MNEMO_CHECK(grads[k].type == w.type()) << "sgd: gradient of '" << s.name << "' is " << grads[k].type.str();
    const TensorView in[3] = {w.view(), grads[k], velocity_[k].view()};
    const TensorView out[2] = {w.view(), velocity_[k].view()};
    update(KernelContext{in, out, &p});
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
