// Node attributes. A node keeps its attributes as an ordered map of plain values (so graphs dump,
// diff and load from configs); each op parses them once, at node creation, into its own typed
// params struct with AttrReader, which rejects unknown keys and wrong types with a clear message.
#pragma once
#include <cstdint>
#include <map>
#include <set>
#include <string>
#include <variant>
#include <vector>

#include "core/error.h"

namespace mnemo {

using AttrValue = std::variant<bool, int64_t, double, std::string, std::vector<int64_t>>;
using Attrs = std::map<std::string, AttrValue>;

std::string attr_str(const AttrValue& v);  // JSON-like text: 3, 0.5, true, "x", [1,2]

// Reads typed values out of Attrs for op `op`; finish() throws if a key was never read.
class AttrReader {
 public:
  AttrReader(const Attrs& attrs, std::string op) : attrs_(attrs), op_(std::move(op)) {}

  bool get_bool(const std::string& key, bool dflt);
  int64_t get_int(const std::string& key, int64_t dflt);
  int64_t require_int(const std::string& key);
  double get_float(const std::string& key, double dflt);
  std::string get_string(const std::string& key, const std::string& dflt);
  std::vector<int64_t> get_ints(const std::string& key, std::vector<int64_t> dflt);
  std::vector<int64_t> require_ints(const std::string& key);
  // Either one int (repeated n times) or a list of n ints, e.g. stride: 2 or stride: [2,1].
  std::vector<int64_t> get_ints_n(const std::string& key, size_t n, int64_t dflt);
  void finish() const;  // unknown keys -> Error naming them and the known ones

 private:
  const AttrValue* find(const std::string& key);
  [[noreturn]] void wrong_type(const std::string& key, const char* expected) const;
  const Attrs& attrs_;
  std::string op_;
  std::vector<std::string> read_;  // keys asked for, repeats allowed (few: a list, not a set, as
                                   // every node of every candidate plan is parsed)
};

}  // namespace mnemo
