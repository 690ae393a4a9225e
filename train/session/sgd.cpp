// SGD's state (see sgd.h).
#include "train/session/sgd.h"


namespace mnemo {

Sgd::Sgd(const ParamStore& params, SgdOptions opt) : opt_(opt) {
  for (const ParamSpec& s : params.specs()) {
    if (!s.trainable) continue;
    velocity_.emplace_back(params.at(s.name).type());
    velocity_.back().zero();
  }
}

int64_t Sgd::state_bytes() const {
  int64_t b = 0;
  for (const Tensor& v : velocity_) b += static_cast<int64_t>(v.bytes());
  return b;
}

}  // namespace mnemo
