// Config loading (yaml-cpp) with file:line:column errors and unknown-key detection.
#include "train/config/config.h"

#include "memory/mirror_planner.h"
#include "ops/conv2d.h"
#include "train/config/files.h"

#include <yaml-cpp/eventhandler.h>
#include <yaml-cpp/yaml.h>

#include <cctype>
#include <fstream>
#include <set>
#include <limits>
#include <sstream>
#include <type_traits>

namespace mnemo {
namespace {

// An optional sign, then 0 or digits not starting with 0.
bool decimal_integer(const std::string& t) {
  size_t i = !t.empty() && (t[0] == '-' || t[0] == '+');
  if (i == t.size()) return false;
  if (t[i] == '0') return i + 1 == t.size();
  for (; i < t.size(); ++i)
    if (t[i] < '0' || t[i] > '9') return false;
  return true;
}

// A YAML mapping with its file and key path; typed reads record the keys used, finish() rejects
// the rest.
class Section {
 public:
  // An absent or empty (null) section reads as a mapping with no keys.
  Section(YAML::Node node, std::string file, std::string path) : n_(std::move(node)), file_(std::move(file)), path_(std::move(path)) {
    if (!n_.IsDefined() || n_.IsNull()) n_ = YAML::Node(YAML::NodeType::Undefined);
    else if (!n_.IsMap()) fail(n_, path_, "a mapping of keys", text(n_));
  }

  [[noreturn]] void fail(const YAML::Node& at, const std::string& key, const std::string& expected, const std::string& got = "") const {
    const YAML::Mark m = at.Mark();
    std::ostringstream os;
    os << file_;
    if (m.line >= 0) os << ':' << m.line + 1 << ':' << m.column + 1;
    os << ": " << key << ": expected " << expected;
    if (!got.empty()) os << ", got " << got;
    throw Error(os.str());
  }
  std::string key(const std::string& k) const { return path_.empty() ? k : path_ + "." + k; }
  std::string text(const YAML::Node& v) const {
    if (v.IsScalar()) return "'" + v.Scalar() + "'";
    return v.IsSequence() ? "a list" : v.IsMap() ? "a mapping" : "nothing";
  }

  // A key given where it does not apply is an error (read, it would be ignored silently): `why`
  // says where it applies.
  void not_here(const std::string& k, const std::string& why) {
    if (const YAML::Node v = raw(k)) fail(v, key(k), "no " + k + " here: " + why, text(v));
  }

  bool has(const std::string& k) {
    used_.insert(k);
    return n_.IsDefined() && n_[k].IsDefined();
  }
  // The value at k, or an undefined node (falsy) when the key or the whole section is absent.
  YAML::Node raw(const std::string& k) {
    used_.insert(k);
    if (!n_.IsDefined()) return YAML::Node(YAML::NodeType::Undefined);
    YAML::Node v = n_[k];
    return v.IsDefined() ? v : YAML::Node(YAML::NodeType::Undefined);
  }
  Section section(const std::string& k) {
    YAML::Node v = raw(k);
    return Section(v, file_, key(k));
  }
  Section require_section(const std::string& k) {
    YAML::Node v = raw(k);
    if (!v || v.IsNull()) fail(n_, key(k), "a section '" + k + "'", "none");
    return Section(v, file_, key(k));
  }

  template <class T>
  T scalar(const std::string& k, const YAML::Node& v, const char* expected) const {
    if (!v.IsScalar()) fail(v, key(k), expected, text(v));
    // Integers in decimal only: yaml-cpp reads a leading 0 as octal and 0x as hexadecimal
    // (`batch: 010` was a batch of 8).
    if constexpr (std::is_integral_v<T> && !std::is_same_v<T, bool>)
      if (!decimal_integer(v.Scalar())) {
        const std::string& t = v.Scalar();
        const bool numeric = !t.empty() && (std::isdigit(static_cast<unsigned char>(t[0])) || t[0] == '-' || t[0] == '+');
        fail(v, key(k), std::string(expected) + (numeric ? " (decimal digits)" : ""), text(v));
      }
    try {
      return v.as<T>();
    } catch (const YAML::Exception&) {
      fail(v, key(k), expected, text(v));
    }
  }
  // Integers are range-checked, never wrapped: a value outside [min, max] (or outside int64, which
  // yaml-cpp refuses to convert) is an error naming the key and the range.
  int64_t get_int(const std::string& k, int64_t dflt, int64_t min = INT64_MIN, int64_t max = kMaxInt) {
    YAML::Node v = raw(k);
    if (!v) return dflt;
    const int64_t x = scalar<int64_t>(k, v, range(min, max).c_str());
    if (x < min || x > max) fail(v, key(k), range(min, max), text(v));
    return x;
  }
  static std::string range(int64_t min, int64_t max) {
    if (min == INT64_MIN) return "an integer <= " + std::to_string(max);
    return "an integer in [" + std::to_string(min) + ", " + std::to_string(max) + "]";
  }
  // Finite numbers in [min, max] (.inf, which yaml-cpp reads, was a learning rate).
  double get_float(const std::string& k, double dflt, double min = -1e300, double max = 1e300) {
    YAML::Node v = raw(k);
    if (!v) return dflt;
    const double x = scalar<double>(k, v, "a number");
    if (!(x >= min && x <= max))
      fail(v, key(k), max < 1e300 ? "a number in [" + number(min) + ", " + number(max) + "]" : "a finite number >= " + number(min), text(v));
    return x;
  }
  static std::string number(double x) {
    std::ostringstream os;
    os << x;
    return os.str();
  }
  bool get_bool(const std::string& k, bool dflt) {
    YAML::Node v = raw(k);
    if (!v) return dflt;
    return scalar<bool>(k, v, "true or false");
  }
  std::string get_string(const std::string& k, const std::string& dflt, const std::vector<std::string>& allowed = {}) {
    YAML::Node v = raw(k);
    if (!v) return dflt;
    std::string s = scalar<std::string>(k, v, "a string");
    if (!allowed.empty() && std::find(allowed.begin(), allowed.end(), s) == allowed.end()) {
      std::string list;
      for (const auto& a : allowed) list += (list.empty() ? "" : ", ") + a;
      fail(v, key(k), "one of " + list, text(v));
    }
    return s;
  }
  std::vector<int64_t> get_ints(const std::string& k, std::vector<int64_t> dflt, int64_t min = INT64_MIN,
                                int64_t max = kMaxInt) {
    YAML::Node v = raw(k);
    if (!v) return dflt;
    if (!v.IsSequence()) fail(v, key(k), "a list of integers", text(v));
    MNEMO_CHECK(v.size() <= 1024) << where(v) << ": " << key(k) << ": expected at most 1024 integers, got " << v.size();
    std::vector<int64_t> out;
    for (size_t i = 0; i < v.size(); ++i) {
      const int64_t x = scalar<int64_t>(k + "[" + std::to_string(i) + "]", v[i], range(min, max).c_str());
      if (x < min || x > max) fail(v[i], key(k) + "[" + std::to_string(i) + "]", range(min, max), text(v[i]));
      out.push_back(x);
    }
    return out;
  }
  // Rejects keys that were never read, naming the known ones.
  void finish() const {
    if (!n_.IsDefined()) return;
    for (auto it = n_.begin(); it != n_.end(); ++it) {
      const std::string k = it->first.as<std::string>();
      if (used_.count(k)) continue;
      std::string known;
      for (const auto& u : used_) known += (known.empty() ? "" : ", ") + u;
      fail(it->first, key(k), "a known key (" + known + ")", "unknown key '" + k + "'");
    }
  }
  const YAML::Node& node() const { return n_; }
  const std::string& file() const { return file_; }
  std::string where(const YAML::Node& at) const {
    const YAML::Mark m = at.Mark();
    return file_ + ":" + std::to_string(m.line + 1) + ":" + std::to_string(m.column + 1);
  }

 private:
  YAML::Node n_;
  std::string file_, path_;
  std::set<std::string> used_;
};

AttrValue attr_value(Section& s, const std::string& k, const YAML::Node& v) {
  if (v.IsSequence()) {
    std::vector<int64_t> xs;
    for (size_t i = 0; i < v.size(); ++i) xs.push_back(s.scalar<int64_t>(k, v[i], "a list of integers"));
    return xs;
  }
  if (!v.IsScalar()) s.fail(v, s.key(k), "a number, boolean, string or list of integers", s.text(v));
  const std::string t = v.Scalar();
  if (t == "true" || t == "false") return t == "true";
  try {
    size_t pos = 0;
    const long long i = std::stoll(t, &pos);
    if (pos == t.size()) return static_cast<int64_t>(i);
  } catch (...) {
  }
  try {
    size_t pos = 0;
    const double d = std::stod(t, &pos);
    if (pos == t.size()) return d;
  } catch (...) {
  }
  return t;
}

GraphVarSpec var_spec(Section& parent, const std::string& group, const YAML::Node& name_node, const YAML::Node& body, bool param) {
  Section s(body, parent.file(), parent.key(group) + "." + name_node.as<std::string>());
  GraphVarSpec v;
  v.name = name_node.as<std::string>();
  v.where = parent.where(name_node);
  std::vector<int64_t> shape = s.get_ints("shape", {}, 0, kMaxElements);
  if (!s.has("shape")) s.fail(body, s.key("shape"), "a shape (list of integers)", "none");
  v.shape.assign(shape.begin(), shape.end());
  v.dtype = parse_dtype(s.get_string("dtype", "float32", {"float32", "int32", "float64"}));
  if (param) {
    const std::string init = s.get_string("init", "normal", {"zeros", "ones", "normal", "uniform"});
    v.init.kind = init == "zeros" ? ParamInit::zeros : init == "ones" ? ParamInit::ones
                : init == "normal" ? ParamInit::normal : ParamInit::uniform;
    v.init.scale = s.get_float("scale", 0.1, 0.0);
    v.trainable = s.get_bool("trainable", true);
  }
  s.finish();
  return v;
}

void parse_model(Section& m, Config& c) {
  c.model_type = m.get_string("type", "", {"resnet", "lstm", "graph", "alexnet", "vgg", "densenet", "inception_v3",
                                            "mobilenet_v2", "darts"});
  if (c.model_type.empty())
    m.fail(m.node(), m.key("type"), std::string("resnet, lstm, graph, ") + zoo_architectures(), "none");
  if (is_zoo_model(c.model_type)) {
    ZooConfig& z = c.zoo;
    z.arch = c.model_type;
    if (z.arch == "vgg") {
      z.depth = static_cast<int>(m.get_int("depth", 16, 1, 1000));
      if (z.depth != 11 && z.depth != 13 && z.depth != 16 && z.depth != 19)
        m.fail(m.raw("depth"), m.key("depth"), "11, 13, 16 or 19", std::to_string(z.depth));
      z.batch_norm = m.get_bool("batch_norm", false);
    } else if (z.arch == "densenet") {
      z.depth = static_cast<int>(m.get_int("depth", 121, 1, 1000));
      for (int64_t b : m.get_ints("blocks", {}, 1, 1000)) z.blocks.push_back(static_cast<int>(b));
      if (z.blocks.empty() && z.depth != 121 && z.depth != 161 && z.depth != 169 && z.depth != 201)
        m.fail(m.raw("depth"), m.key("depth"), "121, 161, 169 or 201 (or model.blocks)", std::to_string(z.depth));
      z.growth = m.get_int("growth", 0, 1, 1 << 16);
      z.init_features = m.get_int("init_features", 0, 1, 1 << 16);
      z.bn_size = m.get_int("bn_size", 0, 1, 1024);
    } else if (z.arch == "inception_v3") {
      z.aux_logits = m.get_bool("aux_logits", false);
    } else if (z.arch == "darts") {
      z.init_channels = m.get_int("init_channels", 36, 2, 1 << 16);
      z.layers = static_cast<int>(m.get_int("layers", 20, 3, 10000));
      Section gs = m.section("genotype");
      if (gs.node().IsDefined()) {
        auto ops = [&](const std::string& key) {
          std::vector<std::pair<std::string, int>> out;
          YAML::Node l = gs.raw(key);
          if (!l || !l.IsSequence()) gs.fail(l ? l : gs.node(), gs.key(key), "a list of [operation, input] pairs", l ? gs.text(l) : "none");
          for (size_t i = 0; i < l.size(); ++i) {
            if (!l[i].IsSequence() || l[i].size() != 2 || !l[i][0].IsScalar() || !l[i][1].IsScalar())
              gs.fail(l[i], gs.key(key) + "[" + std::to_string(i) + "]", "an [operation, input state] pair", gs.text(l[i]));
            const int input = static_cast<int>(gs.scalar<int64_t>(key, l[i][1], "an input state index"));
            if (input < 0 || input > 1000) gs.fail(l[i][1], gs.key(key), "an input state index in [0, 1000]", gs.text(l[i][1]));
            out.push_back({l[i][0].as<std::string>(), input});
          }
          return out;
        };
        z.genotype.normal = ops("normal");
        z.genotype.reduce = ops("reduce");
        z.genotype.normal_concat.clear();
        for (int64_t k : gs.get_ints("normal_concat", {2, 3, 4, 5}, 0, 1000)) z.genotype.normal_concat.push_back(static_cast<int>(k));
        z.genotype.reduce_concat.clear();
        for (int64_t k : gs.get_ints("reduce_concat", {2, 3, 4, 5}, 0, 1000)) z.genotype.reduce_concat.push_back(static_cast<int>(k));
        gs.finish();
      }
    } else if (z.arch == "mobilenet_v2") {
      z.width_mult = m.get_float("width_mult", 1.0, 0.0);
      if (!(z.width_mult > 0 && z.width_mult <= 16))
        m.fail(m.raw("width_mult"), m.key("width_mult"), "a number in (0, 16]", std::to_string(z.width_mult));
    }
  } else if (c.model_type == "resnet") {
    ResNetConfig& r = c.resnet;
    r.style = m.get_string("style", "cifar", {"cifar", "imagenet"});
    r.depth = static_cast<int>(m.get_int("depth", r.style == "cifar" ? 20 : 50, 1, 20000));
    for (int64_t b : m.get_ints("blocks", {}, 1, 10000)) r.blocks.push_back(static_cast<int>(b));
    r.block = m.get_string("block", "", {"basic", "bottleneck"});
    r.width_base = m.get_int("width", 0, 1, 1 << 16);
    r.layout = m.get_string("layout", "auto", {"auto", "plain", "blocked"});
    try {
      resnet_blocks(r);
    } catch (const Error& e) {
      m.fail(m.node(), m.key("depth"), std::string("a valid ResNet shape (") + e.what() + ")");
    }
  } else if (c.model_type == "lstm") {
    LstmConfig& l = c.lstm;
    l.layers = m.get_int("layers", 1, 1, 1024);
    l.hidden = m.get_int("hidden", 128, 1, 1 << 20);
    l.steps = m.get_int("steps", 0, 0, 1 << 20);  // 0: from the data
    l.per_step = m.get_bool("per_step", false);
    l.fused_cell = m.get_string("cell", "ops", {"ops", "fused"}) == "fused";
    c.lstm_head = m.get_string("head", "auto", {"auto", "ops", "fused"});
  } else {
    GraphModelConfig& g = c.graph;
    g.where = m.where(m.node());
    YAML::Node inputs = m.raw("inputs");
    if (!inputs || !inputs.IsMap()) m.fail(m.node(), m.key("inputs"), "a mapping name -> {shape, dtype}", inputs ? m.text(inputs) : "none");
    for (auto it = inputs.begin(); it != inputs.end(); ++it) g.inputs.push_back(var_spec(m, "inputs", it->first, it->second, false));
    YAML::Node params = m.raw("params");
    if (params && !params.IsMap()) m.fail(params, m.key("params"), "a mapping name -> {shape, init, scale}", m.text(params));
    if (params)
      for (auto it = params.begin(); it != params.end(); ++it) g.params.push_back(var_spec(m, "params", it->first, it->second, true));
    YAML::Node nodes = m.raw("nodes");
    if (!nodes || !nodes.IsSequence()) m.fail(m.node(), m.key("nodes"), "a list of nodes", nodes ? m.text(nodes) : "none");
    for (size_t i = 0; i < nodes.size(); ++i) {
      Section s(nodes[i], m.file(), m.key("nodes") + "[" + std::to_string(i) + "]");
      GraphNodeSpec n;
      n.where = m.where(nodes[i]);
      n.name = s.get_string("name", "");
      n.op = s.get_string("op", "");
      if (n.name.empty()) s.fail(nodes[i], s.key("name"), "a node name", "none");
      if (n.op.empty()) s.fail(nodes[i], s.key("op"), "an op name (see `mnemo ops`)", "none");
      if (!op_registry().find(n.op)) s.fail(s.raw("op"), s.key("op"), "a registered op (see `mnemo ops`)", "'" + n.op + "'");
      YAML::Node ins = s.raw("inputs");
      if (ins && !ins.IsSequence()) s.fail(ins, s.key("inputs"), "a list of names", s.text(ins));
      if (ins)
        for (size_t k = 0; k < ins.size(); ++k) n.inputs.push_back(s.scalar<std::string>("inputs", ins[k], "a name"));
      Section a = s.section("attrs");
      if (a.node().IsDefined())
        for (auto it = a.node().begin(); it != a.node().end(); ++it)
          n.attrs[it->first.as<std::string>()] = attr_value(a, it->first.as<std::string>(), it->second);
      n.mirror = static_cast<int>(s.get_int("mirror", -1, 0, kMaxMirror));
      if (n.mirror >= 0) c.mirror[n.name] = n.mirror;
      s.finish();
      g.nodes.push_back(std::move(n));
    }
    g.loss = m.get_string("loss", "");
    if (g.loss.empty()) m.fail(m.node(), m.key("loss"), "the name of the loss node", "none");
    g.logits = m.get_string("logits", "");
  }
  Section mir = m.section("mirror");
  if (mir.node().IsDefined())
    for (auto it = mir.node().begin(); it != mir.node().end(); ++it)
      c.mirror[it->first.as<std::string>()] = static_cast<int>(mir.get_int(it->first.as<std::string>(), 0, 0, kMaxMirror));
  m.finish();
}

// Walks the parser's events before the document is built: aliases are refused (a config needs
// none, and a chain of aliases to aliases expands exponentially: a few hundred bytes could stand
// for 10^10 nodes), and so are more than a million nodes.
class EventLimits final : public YAML::EventHandler {
 public:
  explicit EventLimits(std::string file) : file_(std::move(file)) {}
  // One document: YAML::Load reads the first and a second one after `---` was ignored silently.
  void OnDocumentStart(const YAML::Mark& m) override {
    MNEMO_CHECK(++documents_ == 1) << file_ << ":" << m.line + 1 << ":" << m.column + 1
                                   << ": a second YAML document ('---'); a config is one document";
  }
  void OnDocumentEnd() override {}
  void OnNull(const YAML::Mark& m, YAML::anchor_t) override { count(m); }
  void OnAlias(const YAML::Mark& m, YAML::anchor_t) override {
    MNEMO_FAIL() << file_ << ":" << m.line + 1 << ":" << m.column + 1
                 << ": YAML aliases (*name) are not accepted in configs; write the value out";
  }
  void OnScalar(const YAML::Mark& m, const std::string&, YAML::anchor_t, const std::string&) override { count(m); }
  void OnSequenceStart(const YAML::Mark& m, const std::string&, YAML::anchor_t, YAML::EmitterStyle::value) override { count(m); }
  void OnSequenceEnd() override {}
  void OnMapStart(const YAML::Mark& m, const std::string&, YAML::anchor_t, YAML::EmitterStyle::value) override { count(m); }
  void OnMapEnd() override {}

 private:
  void count(const YAML::Mark& m) {
    MNEMO_CHECK(++nodes_ <= 1000000) << file_ << ":" << m.line + 1 << ": the config has more than a million YAML nodes";
  }
  std::string file_;
  int64_t nodes_ = 0;
  int documents_ = 0;
};

// yaml-cpp keeps the first of two equal keys and ignores the second: refuse them instead.
void reject_duplicate_keys(const YAML::Node& n, const std::string& file, int depth = 0) {
  MNEMO_CHECK(depth < 64) << file << ":" << n.Mark().line + 1 << ": the config nests deeper than 64 levels";
  if (n.IsMap()) {
    std::map<std::string, YAML::Mark> seen;
    for (auto it = n.begin(); it != n.end(); ++it) {
      const YAML::Mark m = it->first.Mark();
      const std::string k = it->first.IsScalar() ? it->first.Scalar() : "(a non-scalar key)";
      auto [prev, fresh] = seen.emplace(k, m);
      MNEMO_CHECK(fresh) << file << ":" << m.line + 1 << ":" << m.column + 1 << ": key '" << k << "' appears twice (first at line "
                         << prev->second.line + 1 << "); a config key may appear once";
      reject_duplicate_keys(it->second, file, depth + 1);
    }
  } else if (n.IsSequence()) {
    for (const YAML::Node& e : n) reject_duplicate_keys(e, file, depth + 1);
  }
}

}  // namespace

Config parse_config(const std::string& text, const std::string& name) {
  YAML::Node root;
  try {
    std::istringstream events(text);
    YAML::Parser parser(events);
    EventLimits limits(name);
    while (parser.HandleNextDocument(limits)) {
    }
    root = YAML::Load(text);
  } catch (const YAML::ParserException& e) {
    throw Error(name + ":" + std::to_string(e.mark.line + 1) + ":" + std::to_string(e.mark.column + 1) +
                ": invalid YAML: " + e.msg);
  }
  if (!root || root.IsNull()) throw Error(name + ": the config is empty (expected model, data, ... sections)");
  reject_duplicate_keys(root, name);
  Config c;
  c.file = name;
  try {
    Section top(root, name, "");
    Section model = top.require_section("model");
    parse_model(model, c);

    Section d = top.require_section("data");
    DataConfig& data = c.data;
    data.source = d.get_string("source", "synthetic", {"synthetic", "synthetic-seq", "fashion-mnist", "fashion-mnist-rows", "cifar10", "text"});
    data.path = d.get_string("path", data.source.rfind("fashion-mnist", 0) == 0 ? "/usr/share/datasets/fashion-mnist" : "");
    if ((data.source == "cifar10" || data.source == "text") && data.path.empty())
      d.fail(d.node(), d.key("path"), data.source == "text" ? "the text file to read" : "the directory of the CIFAR-10 binary files", "none");
    data.batch = d.get_int("batch", 64, 1, 1 << 24);
    data.eval_batch = d.get_int("eval_batch", 0, 0, 1 << 24);
    std::vector<int64_t> shape = d.get_ints("shape", {}, 1, 1 << 24);
    data.shape.assign(shape.begin(), shape.end());
    if (data.source.rfind("synthetic", 0) == 0 && data.shape.empty() && c.model_type != "graph")
      d.fail(d.node(), d.key("shape"), "the per-example shape of synthetic data, e.g. [3, 32, 32]", "none");
    data.classes = d.get_int("classes", 10, 2, 1 << 24);
    data.size = d.get_int("size", 50000, 1, int64_t{1} << 31);
    data.eval_size = d.get_int("eval_size", 10000, 0, int64_t{1} << 31);
    data.steps = d.get_int("steps", 0, 0, 1 << 20);
    if (data.source == "text" && data.steps < 1) d.fail(d.node(), d.key("steps"), "the number of characters per sequence (>= 1)", "none");
    data.eval = d.get_bool("eval", true);
    // Keys of other sources (each was ignored: fashion-mnist with size: 100 trained on 60000).
    const bool synthetic = data.source.rfind("synthetic", 0) == 0;
    const std::string src = "data.source is " + data.source;
    if (!synthetic)
      for (const char* k : {"shape", "classes", "size", "eval_size"})
        d.not_here(k, std::string(k) + " describes synthetic data (" + src + ", whose files fix it)");
    if (data.source != "text") d.not_here("steps", "the characters per sequence of data.source text (" + src + ")");
    if (synthetic) d.not_here("path", "synthetic data reads no file (" + src + ")");
    if (c.model_type == "graph")  // (it was ignored)
      d.not_here("eval_batch", "a graph config is evaluated at the batch of its graph's inputs (data.batch)");
    d.finish();

    Section o = top.section("optimizer");
    c.optimizer.type = o.get_string("type", "sgd", {"sgd"});
    // Finite in float32, the step's type (lr: 1e40 was accepted here and was inf in the step).
    const double f32_max = std::numeric_limits<float>::max();
    c.optimizer.lr = o.get_float("lr", 0.1, 0.0, f32_max);
    c.optimizer.momentum = o.get_float("momentum", 0.9, 0.0, f32_max);
    c.optimizer.weight_decay = o.get_float("weight_decay", 0.0, 0.0, f32_max);
    o.finish();

    Section s = top.section("schedule");
    c.schedule.type = s.get_string("type", "constant", {"constant", "step", "cosine"});
    c.schedule.warmup_steps = s.get_int("warmup_steps", 0, 0, kMaxSteps);
    c.schedule.milestones = s.get_ints("milestones", {}, 1, kMaxSteps);
    c.schedule.gamma = s.get_float("gamma", 0.1, 0.0);
    c.schedule.min_lr = s.get_float("min_lr", 0.0, 0.0);
    if (c.schedule.type == "step" && c.schedule.milestones.empty())
      s.fail(s.node(), s.key("milestones"), "the steps at which a step schedule multiplies lr by gamma", "none");
    // A key of another type was ignored (milestones without type: step kept lr constant).
    const std::string sched = "the schedule is " + c.schedule.type + (s.has("type") ? "" : " (schedule.type's default)");
    if (c.schedule.type != "step")
      for (const char* k : {"milestones", "gamma"}) s.not_here(k, std::string(k) + " applies to schedule.type step; " + sched);
    if (c.schedule.type != "cosine") s.not_here("min_lr", "min_lr applies to schedule.type cosine; " + sched);
    // (min_lr above lr made the cosine schedule rise: 0.05 -> 0.47 over the run)
    if (c.schedule.min_lr > c.optimizer.lr) {
      std::ostringstream lr;
      lr << c.optimizer.lr;
      s.fail(s.raw("min_lr"), s.key("min_lr"), "at most optimizer.lr (" + lr.str() + "): the cosine schedule decays from lr to min_lr",
             s.text(s.raw("min_lr")));
    }
    s.finish();

    Section t = top.section("train");
    c.run.steps = t.get_int("steps", 0, 1, kMaxSteps);
    c.run.epochs = t.get_int("epochs", 0, 1, kMaxSteps);
    if ((c.run.steps > 0) == (c.run.epochs > 0))
      t.fail(t.node().IsDefined() ? t.node() : root, t.key("steps"), "exactly one of train.steps or train.epochs");
    c.run.log_every = t.get_int("log_every", 10, 1, kMaxSteps);
    c.run.eval_every = t.get_int("eval_every", 0, 0, kMaxSteps);
    c.run.seed = static_cast<uint64_t>(t.get_int("seed", 1, 0, INT64_MAX));
    c.run.threads = static_cast<int>(t.get_int("threads", 0, 0, 4096));
    c.run.metrics = t.get_string("metrics", "");
    if (!c.data.eval) t.not_here("eval_every", "data.eval is false: the run evaluates nothing");
    t.finish();

    c.memory = top.get_string("memory", "share");
    try {
      parse_memory_mode(c.memory);
    } catch (const Error& e) {
      top.fail(top.raw("memory"), "memory",
               c.memory.rfind("budget=", 0) == 0
                   ? std::string("budget=SIZE with SIZE a positive size like 2GiB, 900MB or 123456789 (bytes), or a factor of share's total like 0.5x")
                   : std::string("a memory mode: ") + kMemoryModeNames,
               "'" + c.memory + "'");
    }
    c.order = top.get_string("order", "default", {"default", "greedy", "optimal", "updates-last"});
    c.placement_seconds = top.get_float("placement_seconds", 5, 0, kMaxTimeLimitSeconds);
    c.device = top.get_string("device", "cpu", {"cpu", "cuda", "host"});
    Section k = top.section("checkpoint");
    c.checkpoint.dir = k.get_string("dir", "");
    c.checkpoint.every = k.get_int("every", 0, 0, kMaxSteps);
    if (c.checkpoint.dir.empty()) k.not_here("every", "checkpoints go to checkpoint.dir, which is not given");
    k.finish();
    Section pc = top.section("parallel");
    c.parallel.bucket_bytes = pc.get_int("bucket_bytes", c.parallel.bucket_bytes, 0, INT32_MAX);
    c.parallel.timeout_s = pc.get_float("timeout_s", c.parallel.timeout_s, 1);
    c.parallel.reduce_one_rank = pc.get_bool("reduce_one_rank", c.parallel.reduce_one_rank);
    pc.finish();
    top.finish();
  } catch (const YAML::Exception& e) {
    throw Error(name + ":" + std::to_string(e.mark.line + 1) + ":" + std::to_string(e.mark.column + 1) + ": " + e.msg);
  }
  return c;
}

Config load_config(const std::string& path) {
  return parse_config(read_small_file(path, "config file", kMaxConfigBytes), path);
}

DataShape static_data_shape(const Config& c) {
  const DataConfig& d = c.data;
  if (d.source == "fashion-mnist") return {{1, 28, 28}, 10, false};
  if (d.source == "fashion-mnist-rows") return {{28, 28}, 10, false};
  if (d.source == "cifar10") return {{3, 32, 32}, 10, false};
  if (d.source == "synthetic" && d.shape.empty() && c.model_type == "graph") {
    for (const GraphVarSpec& v : c.graph.inputs)
      if (v.name == "data") {
        MNEMO_CHECK(!v.shape.empty() && v.shape[0] == d.batch)
            << c.file << ": model.inputs.data.shape must start with the batch size data.batch = " << d.batch
            << ", got " << shape_str(v.shape);
        return {Shape(v.shape.begin() + 1, v.shape.end()), d.classes, false};
      }
  }
  if (d.source == "synthetic") return {d.shape, d.classes, false};
  if (d.source == "synthetic-seq") return {d.shape, d.classes, c.model_type == "lstm" && c.lstm.per_step};
  MNEMO_FAIL() << c.file << ": data.source '" << d.source << "' has no static shape (its vocabulary comes from the file)";
}

int64_t resnet_block(const ResNetConfig& r, const std::string& device) {
  if (r.layout == "plain") return 0;
  const bool gpu = is_cuda_device(device);
  const int64_t block = ops::conv::onednn_channel_block();  // oneDNN's own layout on this CPU
  const bool fits = r.dtype == DType::f32 && block > 0 && resnet_base_width(r) % block == 0;
  // No activation of the net holds more than batch x max(C, base width) x H x W elements; past
  // oneDNN's 32-bit range its convolutions run on the im2col kernels, which need plain activations.
  const int64_t most = numel({r.batch, std::max(r.channels, resnet_base_width(r)), r.height, r.width});
  if (r.layout == "auto") return !gpu && fits && most <= INT32_MAX ? block : 0;  // blocked where it runs
  MNEMO_CHECK(!gpu) << "model.layout: blocked is oneDNN's layout (the CPU); device " << device
                    << " runs plain activations: use layout: plain or auto";
  MNEMO_CHECK(block > 0) << "model.layout: blocked: oneDNN's convolutions use no channel-blocked layout on this CPU; "
                         << "use layout: plain or auto";
  MNEMO_CHECK(fits) << "model.layout: blocked runs oneDNN's float32 kernels on channel counts that are multiples of "
                    << block << "; model.width is " << resnet_base_width(r) << " (" << dtype_name(r.dtype)
                    << "): use layout: plain or auto";
  return block;
}

bool lstm_fused_head(const Config& c) {
  if (c.lstm_head != "auto") return c.lstm_head == "fused";
  // The fused head pays where there are logits at every step to keep or recompute. On a GPU its
  // kernels have not yet run (docs/GPU.md), so auto stays with the per-step ops there.
  return c.lstm.per_step && !is_cuda_device(c.device);
}

BuiltModel build_model(const Config& c, const DataShape& ds, int64_t batch, bool training) {
  const auto where = [&]() { return c.file + ": "; };
  try {
    if (c.model_type == "resnet") {
      MNEMO_CHECK(ds.sample.size() == 3) << "model.type resnet needs image data [C,H,W], data gives " << shape_str(ds.sample);
      ResNetConfig r = c.resnet;
      r.batch = batch;
      r.channels = ds.sample[0], r.height = ds.sample[1], r.width = ds.sample[2];
      r.classes = ds.classes;
      r.training = training;
      r.channel_block = resnet_block(r, c.device);
      return build_resnet(r);
    }
    if (c.model_type == "lstm") {
      MNEMO_CHECK(ds.sample.size() == 2) << "model.type lstm needs sequence data [T,D], data gives " << shape_str(ds.sample);
      LstmConfig l = c.lstm;
      MNEMO_CHECK(l.steps == 0 || l.steps == ds.sample[0])
          << "model.steps (" << l.steps << ") differs from the data's sequence length " << ds.sample[0];
      l.steps = ds.sample[0];
      l.input = ds.sample[1];
      l.batch = batch;
      l.classes = ds.classes;
      l.training = training;
      l.fused_head = lstm_fused_head(c);
      MNEMO_CHECK(l.per_step == ds.per_step_labels || c.data.source == "synthetic-seq")
          << "model.per_step is " << (l.per_step ? "true" : "false") << " but data.source " << c.data.source
          << (ds.per_step_labels ? " labels every step" : " labels whole sequences");
      return build_lstm_model(l);
    }
    if (is_zoo_model(c.model_type)) {
      MNEMO_CHECK(ds.sample.size() == 3) << "model.type " << c.model_type << " needs image data [C,H,W], data gives "
                                         << shape_str(ds.sample);
      ZooConfig z = c.zoo;
      z.batch = batch;
      z.channels = ds.sample[0], z.height = ds.sample[1], z.width = ds.sample[2];
      z.classes = ds.classes;
      z.training = training;
      return build_zoo_model(z);
    }
    MNEMO_CHECK(batch == c.data.batch || training) << "a generic graph evaluates at its training batch only";
    // One rank's share of a data-parallel batch: `data` and `labels` start with the rank's batch
    // (every other shape is inferred from them; an attribute naming the batch fails inference).
    Config share = c;
    if (batch != c.data.batch) set_batch(share, batch);
    BuiltModel m = build_graph_model(share.graph, training);
    // The logits' width is the data's class count: labels index it (a mismatch failed at run time
    // only when a label fell outside, or trained on a subset of the classes silently).
    if (m.logits.node >= 0) {
      const TensorType& t = m.builder.graph().type(m.logits);
      MNEMO_CHECK(!t.shape.empty() && t.shape.back() == ds.classes)
          << "model.logits '" << c.graph.logits << "' is " << t.str() << ": " << (t.shape.empty() ? 0 : t.shape.back())
          << " classes in its last dimension, but the data has " << ds.classes << " (data.classes or the dataset's)";
    }
    return m;
  } catch (const Error& e) {
    // (A graph node's error names the file and its line already.)
    const std::string what = e.what();
    throw Error(what.rfind(c.file + ":", 0) == 0 ? what : where() + what);
  }
}

void set_batch(Config& c, int64_t batch) {
  c.data.batch = batch;
  for (GraphVarSpec& v : c.graph.inputs)
    if ((v.name == "data" || v.name == "labels") && !v.shape.empty()) v.shape[0] = batch;
}

}  // namespace mnemo
