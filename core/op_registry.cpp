// The registry's table operations (the table itself is filled by ops/).
#include "core/op_registry.h"

namespace mnemo {

void OpRegistry::add(OpDef def) {
  MNEMO_ASSERT(!def.name.empty()) << "op registered from ops/" << file_ << ".cpp has no name";
  MNEMO_ASSERT(!ops_.count(def.name)) << "op '" << def.name << "' registered twice (ops/"
                                     << ops_.at(def.name)->file << ".cpp and ops/" << file_ << ".cpp)";
  MNEMO_ASSERT(def.infer) << "op '" << def.name << "' has no infer function";
  MNEMO_ASSERT(def.kind != OpKind::compute || !def.backends.cpu || def.cpu)
      << "op '" << def.name << "' declares a CPU kernel but has none";
  MNEMO_ASSERT(def.accumulates < 0 || (def.accumulates == def.min_inputs && def.accumulates + 1 == def.max_inputs))
      << "op '" << def.name << "': its accumulator input must be its last, optional input";
  MNEMO_ASSERT(def.updates.empty() || def.traits.updates_state)
      << "op '" << def.name << "' updates inputs in place but does not declare traits.updates_state";
  def.file = file_;
  if (!def.parse) {
    std::string name = def.name;
    def.parse = [name](const Attrs& a) -> std::shared_ptr<const void> {
      AttrReader(a, name).finish();
      return nullptr;
    };
  }
  const std::string name = def.name;
  ops_[name] = std::make_unique<OpDef>(std::move(def));
}

const OpDef* OpRegistry::find(const std::string& name) const {
  auto it = ops_.find(name);
  return it == ops_.end() ? nullptr : it->second.get();
}

const OpDef& OpRegistry::get(const std::string& name) const {
  if (const OpDef* d = find(name)) return *d;
  std::string known;
  for (const auto& [n, d] : ops_) known += (known.empty() ? "" : ", ") + n;
  MNEMO_FAIL() << "unknown op '" << name << "' (known ops: " << known << ")";
}

std::vector<const OpDef*> OpRegistry::all() const {
  std::vector<const OpDef*> v;
  for (const auto& [n, d] : ops_) v.push_back(d.get());
  return v;
}

}  // namespace mnemo
