// Parameter initialisation and binding.
#include "train/session/param_store.h"

#include <cmath>
#include <random>

namespace mnemo {

static uint64_t fnv1a(const std::string& s) {
  uint64_t h = 1469598103934665603ull;
  for (unsigned char ch : s) h = (h ^ ch) * 1099511628211ull;
  return h;
}

ParamStore::ParamStore(const Graph& g, const std::vector<ParamSpec>& specs, uint64_t seed) : specs_(specs) {
  for (const ParamSpec& s : specs) {
    Tensor t(g.node(s.node).outputs[0]);
    std::mt19937_64 rng(seed ^ fnv1a(s.name));
    auto fill = [&]<class T>() {
      T* p = t.as<T>();
      std::normal_distribution<double> normal(0.0, s.init.scale);
      std::uniform_real_distribution<double> uniform(-s.init.scale, s.init.scale);
      for (int64_t i = 0; i < t.numel(); ++i) {
        switch (s.init.kind) {
          case ParamInit::zeros: p[i] = T(0); break;
          case ParamInit::ones: p[i] = T(1); break;
          case ParamInit::normal: p[i] = static_cast<T>(normal(rng)); break;
          case ParamInit::uniform: p[i] = static_cast<T>(uniform(rng)); break;
        }
      }
    };
    dispatch_float(t.dtype(), "parameter init", fill);
    values_.emplace(s.name, std::move(t));
  }
}

Tensor& ParamStore::at(const std::string& name) {
  auto it = values_.find(name);
  MNEMO_CHECK(it != values_.end()) << "no parameter named '" << name << "'";
  return it->second;
}
const Tensor& ParamStore::at(const std::string& name) const { return const_cast<ParamStore*>(this)->at(name); }

void ParamStore::bind(Executor& ex) const {
  for (const auto& [name, t] : values_) ex.bind(name, t.view());
}

int64_t ParamStore::bytes() const {
  int64_t b = 0;
  for (const auto& [name, t] : values_) b += static_cast<int64_t>(t.bytes());
  return b;
}

void check_state_finite(const std::vector<ParamSpec>& specs, const std::map<std::string, Tensor>& values, const std::string& what,
                        const std::string& prefix) {
  for (const ParamSpec& s : specs) {
    if (s.trainable) continue;
    auto it = values.find(prefix + s.name);
    if (it == values.end() || it->second.dtype() != DType::f32) continue;
    const float* v = it->second.as<float>();
    for (int64_t i = 0; i < it->second.numel(); ++i)
      MNEMO_CHECK(std::isfinite(v[i])) << what << ": '" << prefix + s.name << "' element " << i << " = " << v[i]
                                       << ": running statistics must be finite (evaluation normalises with them)";
  }
}

}  // namespace mnemo
