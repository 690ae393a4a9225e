// Checkpoint save/load (see checkpoint.h).
#include "train/session/checkpoint.h"

#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>

#include "train/session/safetensors.h"

namespace mnemo {

std::string model_signature(const ParamStore& params) {
  std::string s;
  for (const ParamSpec& p : params.specs()) s += p.name + ":" + params.at(p.name).type().str() + (p.trainable ? "" : "(state)") + ";";
  return s;
}

void save_checkpoint(const std::string& path, const ParamStore& params, const Sgd& sgd, const TrainState& state,
                     const std::string& config_file) {
  std::vector<std::pair<std::string, TensorView>> tensors;
  size_t k = 0;
  for (const ParamSpec& p : params.specs()) {
    tensors.push_back({"param/" + p.name, params.at(p.name).view()});
    if (p.trainable) tensors.push_back({"velocity/" + p.name, sgd.state().at(k++).view()});
  }
  const std::map<std::string, std::string> meta = {
      {"format", "mnemo-checkpoint-2"},      {"step", std::to_string(state.step)},
      {"data_position", std::to_string(state.data_position)}, {"seed", std::to_string(state.seed)},
      {"model_signature", model_signature(params)}, {"config", config_file},
      {"mnemo_version", MNEMO_VERSION}};
  std::map<std::string, std::string> all = meta;
  if (!state.data_order.empty()) all["data_order"] = state.data_order;
  if (!state.training.empty()) all["training"] = state.training;
  if (std::isfinite(state.loss_ema)) {
    char ema[32];
    std::snprintf(ema, sizeof ema, "%.17g", state.loss_ema);
    all["loss_ema"] = ema;
  }
  write_safetensors(path, tensors, all);
}

static int64_t meta_int(const TensorFile& f, const std::string& path, const std::string& key) {
  auto it = f.metadata.find(key);
  MNEMO_CHECK(it != f.metadata.end()) << "checkpoint " << path << ": metadata has no '" << key << "'";
  try {
    size_t pos = 0;
    const long long v = std::stoll(it->second, &pos);
    MNEMO_CHECK(pos == it->second.size() && v >= 0) << "bad value";
    return v;
  } catch (...) {
    MNEMO_FAIL() << "checkpoint " << path << ": metadata '" << key << "' is '" << it->second << "', expected a count";
  }
}

TrainState load_checkpoint(const std::string& path, ParamStore& params, Sgd& sgd) {
  TensorFile f = read_safetensors(path);
  auto fmt = f.metadata.find("format");
  // Format 2 has a CRC-32 per tensor (required); format 1 (older mnemo) has none and is still read.
  const bool v1 = fmt != f.metadata.end() && fmt->second == "mnemo-checkpoint-1";
  MNEMO_CHECK(fmt != f.metadata.end() && (v1 || fmt->second == "mnemo-checkpoint-2"))
      << "checkpoint " << path << ": not a mnemo checkpoint (metadata format is '"
      << (fmt == f.metadata.end() ? std::string("missing") : fmt->second) << "', expected 'mnemo-checkpoint-2' or -1)";
  // Check everything before changing anything: a refused checkpoint leaves the run untouched.
  size_t k = 0;
  std::vector<std::pair<Tensor*, const Tensor*>> copies;
  for (const ParamSpec& p : params.specs()) {
    for (const std::string& kind : {std::string("param/"), std::string("velocity/")}) {
      if (kind == "velocity/" && !p.trainable) continue;
      auto it = f.tensors.find(kind + p.name);
      MNEMO_CHECK(it != f.tensors.end()) << "checkpoint " << path << " does not fit this model: it has no tensor '" << kind + p.name
                                         << "' (was it made with another config?)";
      Tensor& dst = kind == "param/" ? params.at(p.name) : sgd.state().at(k);
      MNEMO_CHECK(it->second.type() == dst.type()) << "checkpoint " << path << " does not fit this model: '" << kind + p.name
                                                   << "' is " << it->second.type().str() << ", the model needs " << dst.type().str();
      copies.push_back({&dst, &it->second});
    }
    if (p.trainable) ++k;
  }
  for (const auto& [name, t] : f.tensors)
    MNEMO_CHECK(v1 || f.checksummed.count(name)) << "checkpoint " << path << ": tensor '" << name
                                                 << "' has no checksum (a mnemo-checkpoint-2 file has one per tensor)";
  MNEMO_CHECK(copies.size() == f.tensors.size()) << "checkpoint " << path << " does not fit this model: it holds "
                                                 << f.tensors.size() << " tensors, the model " << copies.size();
  // The model's signature as saved (format 2 always writes it): the tensors above already fit, so
  // a different one means the metadata was edited or belongs to another file.
  if (auto sig = f.metadata.find("model_signature"); !v1 || sig != f.metadata.end()) {
    MNEMO_CHECK(sig != f.metadata.end() && sig->second == model_signature(params))
        << "checkpoint " << path << ": metadata 'model_signature' "
        << (sig == f.metadata.end() ? std::string("is missing") : "does not match its tensors and this model")
        << " (expected the parameters' names and types as saved)";
  }
  TrainState s;
  s.step = meta_int(f, path, "step");
  s.data_position = meta_int(f, path, "data_position");
  s.seed = static_cast<uint64_t>(meta_int(f, path, "seed"));
  if (auto it = f.metadata.find("data_order"); it != f.metadata.end()) s.data_order = it->second;
  if (auto it = f.metadata.find("training"); it != f.metadata.end()) s.training = it->second;
  if (auto it = f.metadata.find("loss_ema"); it != f.metadata.end()) {
    char* end = nullptr;
    const double v = std::strtod(it->second.c_str(), &end);
    MNEMO_CHECK(!it->second.empty() && *end == 0 && std::isfinite(v))
        << "checkpoint " << path << ": metadata 'loss_ema' is '" << it->second << "', expected a finite number";
    s.loss_ema = v;
  }
  check_state_finite(params.specs(), f.tensors, "checkpoint " + path, "param/");  // (before anything is restored)
  for (auto& [dst, src] : copies) std::memcpy(dst->data(), src->data(), dst->bytes());
  return s;
}

}  // namespace mnemo
