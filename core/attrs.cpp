// Attribute printing and typed reading.
#include "core/attrs.h"

#include <algorithm>
#include <set>
#include <sstream>

namespace mnemo {

std::string attr_str(const AttrValue& v) {
  std::ostringstream os;
  std::visit(
      [&](const auto& x) {
        using X = std::decay_t<decltype(x)>;
        if constexpr (std::is_same_v<X, bool>) os << (x ? "true" : "false");
        else if constexpr (std::is_same_v<X, std::string>) os << '"' << x << '"';
        else if constexpr (std::is_same_v<X, std::vector<int64_t>>) {
          os << '[';
          for (size_t i = 0; i < x.size(); ++i) os << (i ? "," : "") << x[i];
          os << ']';
        } else os << x;
      },
      v);
  return os.str();
}

const AttrValue* AttrReader::find(const std::string& key) {
  if (read_.empty()) read_.reserve(8);
  read_.push_back(key);
  auto it = attrs_.find(key);
  return it == attrs_.end() ? nullptr : &it->second;
}

void AttrReader::wrong_type(const std::string& key, const char* expected) const {
  MNEMO_FAIL() << "op " << op_ << ": attribute '" << key << "' must be " << expected << ", got "
               << attr_str(attrs_.at(key));
}

bool AttrReader::get_bool(const std::string& key, bool dflt) {
  const AttrValue* v = find(key);
  if (!v) return dflt;
  if (auto* b = std::get_if<bool>(v)) return *b;
  wrong_type(key, "a boolean");
}

int64_t AttrReader::get_int(const std::string& key, int64_t dflt) {
  const AttrValue* v = find(key);
  if (!v) return dflt;
  if (auto* i = std::get_if<int64_t>(v)) return *i;
  wrong_type(key, "an integer");
}

int64_t AttrReader::require_int(const std::string& key) {
  MNEMO_CHECK(attrs_.count(key)) << "op " << op_ << ": missing attribute '" << key << "' (an integer)";
  return get_int(key, 0);
}

double AttrReader::get_float(const std::string& key, double dflt) {
  const AttrValue* v = find(key);
  if (!v) return dflt;
  if (auto* d = std::get_if<double>(v)) return *d;
  if (auto* i = std::get_if<int64_t>(v)) return static_cast<double>(*i);
  wrong_type(key, "a number");
}

std::string AttrReader::get_string(const std::string& key, const std::string& dflt) {
  const AttrValue* v = find(key);
  if (!v) return dflt;
  if (auto* s = std::get_if<std::string>(v)) return *s;
  wrong_type(key, "a string");
}

std::vector<int64_t> AttrReader::get_ints(const std::string& key, std::vector<int64_t> dflt) {
  const AttrValue* v = find(key);
  if (!v) return dflt;
  if (auto* l = std::get_if<std::vector<int64_t>>(v)) return *l;
  wrong_type(key, "a list of integers");
}

std::vector<int64_t> AttrReader::require_ints(const std::string& key) {
  MNEMO_CHECK(attrs_.count(key)) << "op " << op_ << ": missing attribute '" << key
                                 << "' (a list of integers)";
  return get_ints(key, {});
}

std::vector<int64_t> AttrReader::get_ints_n(const std::string& key, size_t n, int64_t dflt) {
  const AttrValue* v = find(key);
  if (!v) return std::vector<int64_t>(n, dflt);
  if (auto* i = std::get_if<int64_t>(v)) return std::vector<int64_t>(n, *i);
  if (auto* l = std::get_if<std::vector<int64_t>>(v)) {
    if (l->size() == n) return *l;
    MNEMO_FAIL() << "op " << op_ << ": attribute '" << key << "' must have " << n << " values, got "
                 << attr_str(*v);
  }
  wrong_type(key, "an integer or a list of integers");
}

void AttrReader::finish() const {
  std::string unknown;
  for (const auto& [k, v] : attrs_)
    if (std::find(read_.begin(), read_.end(), k) == read_.end()) unknown += (unknown.empty() ? "" : ", ") + k;
  if (unknown.empty()) return;
  std::string known;
  for (const auto& k : std::set<std::string>(read_.begin(), read_.end())) known += (known.empty() ? "" : ", ") + k;
  MNEMO_FAIL() << "op " << op_ << ": unknown attribute(s) " << unknown << " (known: "
               << (known.empty() ? "none" : known) << ")";
}

}  // namespace mnemo
