// ONNX import (see onnx_import.h). Operators and what they become:
//   Conv                      conv2d {stride, padding, dilation, groups} (+ bias)
//   BatchNormalization        batch_norm with running statistics {eps, momentum = 1 - ONNX's}
//   Relu, Sigmoid, Tanh       relu, sigmoid, tanh
//   Clip                      clip {min, max} (bounds from inputs or, before opset 11, attributes)
//   MaxPool, AveragePool      max_pool2d / avg_pool2d {kernel, stride, padding, ceil_mode,
//                             count_include_pad}
//   GlobalAveragePool         global_avg_pool, then a reshape to [N, C, 1, 1] (a view)
//   ReduceMean over H, W      the same (without the reshape when keepdims = 0)
//   Gemm                      fully_connected (transB = 1; with transB = 0 the weight is stored
//                             transposed); MatMul by a 2-D parameter likewise, and a following
//                             Add of a 1-D parameter becomes its bias
//   Flatten, Reshape          flatten {axis}, reshape {shape} (0 in the shape copies the input's dim)
//   Concat, Split, Slice      concat {axis}, split {axis, sizes}, slice {axis, begin, end} (one axis,
//                             step 1)
//   Add, Mul                  add, mul (same shapes: mnemo does not broadcast)
//   Dropout                   dropout {p} (training mode in the training graph, identity in evaluation)
//   Identity, Cast to float   identity; of a parameter or constant: a parameter of its own (exporters
//                             merge equal initializers through Identity nodes)
// Anything else is an error naming the operator and the node.
#include "train/config/onnx_import.h"

#include <yaml-cpp/yaml.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <fstream>
#include <map>
#include <set>
#include <sstream>

#include <onnx/onnx_pb.h>
#include <onnx/shape_inference/implementation.h>

#include "core/attrs.h"
#include "core/error.h"

namespace mnemo {
namespace {

constexpr int64_t kMaxOnnxBytes = int64_t{2} << 30;  // protobuf's own limit on one message

// A name from the file as it may appear in a message: non-printable and non-ASCII bytes as \xNN.
std::string printable(const std::string& s) {
  std::string out;
  for (unsigned char ch : s) {
    if (ch >= 0x20 && ch < 0x7f) {
      out += static_cast<char>(ch);
    } else {
      char buf[8];
      std::snprintf(buf, sizeof buf, "\\x%02x", ch);
      out += buf;
    }
  }
  return out;
}

std::string sanitize(const std::string& s) {
  std::string out;
  for (char ch : s) {
    if (std::isalnum(static_cast<unsigned char>(ch)) || ch == '_' || ch == '-') out += ch;
    else if (ch == '.' || ch == '/') out += '/';
    else out += '_';
  }
  while (!out.empty() && out.front() == '/') out.erase(out.begin());
  while (!out.empty() && out.back() == '/') out.pop_back();
  std::string collapsed;
  for (char ch : out)
    if (!(ch == '/' && !collapsed.empty() && collapsed.back() == '/')) collapsed += ch;
  return collapsed.empty() ? "v" : collapsed;
}

struct ParamOut {
  std::string name;
  Shape shape;
  std::string init = "normal";
  double scale = 0.1;
  bool trainable = true;
};

struct NodeOut {
  std::string name, op;
  std::vector<std::string> inputs;
  Attrs attrs;
};

// The parameter roles an operator's inputs play (their initialisation in structure-only imports).
enum class Role { weight, bias, gamma, beta, running_mean, running_var };

class Importer {
 public:
  Importer(std::string file, onnx::ModelProto& model, const OnnxImportOptions& opt) : file_(std::move(file)), m_(model), opt_(opt) {}

  OnnxImport run();

 private:
  [[noreturn]] void fail_node(const onnx::NodeProto& n, const std::string& msg) const {
    MNEMO_FAIL() << file_ << ": node '" << printable(n.name().empty() ? n.output_size() ? n.output(0) : "?" : n.name()) << "' ("
                 << printable(n.op_type()) << "): " << printable(msg);
  }
  std::string unique(const std::string& base) {
    std::string n = base;
    for (int k = 2; used_.count(n); ++k) n = base + "_" + std::to_string(k);
    used_.insert(n);
    return n;
  }

  // Attributes.
  const onnx::AttributeProto* attr(const onnx::NodeProto& n, const std::string& name) const {
    for (const auto& a : n.attribute())
      if (a.name() == name) return &a;
    return nullptr;
  }
  int64_t attr_int(const onnx::NodeProto& n, const std::string& name, int64_t dflt) const {
    const auto* a = attr(n, name);
    return a ? a->i() : dflt;
  }
  double attr_float(const onnx::NodeProto& n, const std::string& name, double dflt) const {
    const auto* a = attr(n, name);
    return a ? a->f() : dflt;
  }
  std::vector<int64_t> attr_ints(const onnx::NodeProto& n, const std::string& name, std::vector<int64_t> dflt) const {
    const auto* a = attr(n, name);
    return a ? std::vector<int64_t>(a->ints().begin(), a->ints().end()) : dflt;
  }
  std::string attr_string(const onnx::NodeProto& n, const std::string& name, const std::string& dflt) const {
    const auto* a = attr(n, name);
    return a ? a->s() : dflt;
  }

  // Shapes from ONNX's shape inference (empty when unknown).
  Shape shape_of(const std::string& value) const {
    auto it = shapes_.find(value);
    return it == shapes_.end() ? Shape{} : it->second;
  }
  void record_shapes(const onnx::ValueInfoProto& v) {
    if (!v.type().has_tensor_type() || !v.type().tensor_type().has_shape()) return;
    Shape s;
    for (const auto& d : v.type().tensor_type().shape().dim()) {
      if (!d.has_dim_value()) return;  // symbolic: unknown
      s.push_back(d.dim_value());
    }
    shapes_[v.name()] = s;
  }

  // Constant tensors (initializers and Constant nodes): data as int64 or double.
  const onnx::TensorProto* constant(const std::string& value) const {
    auto it = consts_.find(value);
    return it == consts_.end() ? nullptr : it->second;
  }
  std::vector<double> values(const onnx::TensorProto& t, const std::string& what) const;
  int64_t element_count(const onnx::TensorProto& t, const std::string& what) const;  // checked
  std::vector<int64_t> const_ints(const onnx::NodeProto& n, int input) const {
    const onnx::TensorProto* t = n.input_size() > input && !n.input(input).empty() ? constant(n.input(input)) : nullptr;
    if (!t) fail_node(n, "input " + std::to_string(input) + " must be a constant (an initializer or a Constant node)");
    return ints(*t, n.input(input));
  }
  // An integer tensor's values exactly (INT64_MAX, ONNX's "to the end", stays itself); float
  // tensors are rounded and clamped to +-2^62.
  std::vector<int64_t> ints(const onnx::TensorProto& t, const std::string& what) const;
  bool has_input(const onnx::NodeProto& n, int i) const { return n.input_size() > i && !n.input(i).empty(); }

  // A parameter input: an initializer (with its data) or, in structure-only exports, a graph input.
  std::string param(const onnx::NodeProto& n, int input, Role role, bool transpose = false);
  // A computed input: the mnemo reference of an earlier node's output or of the data input.
  std::string ref(const onnx::NodeProto& n, int input) const {
    if (!has_input(n, input)) fail_node(n, "input " + std::to_string(input) + " is missing");
    auto it = refs_.find(n.input(input));
    if (it == refs_.end()) {
      if (constant(n.input(input)) || graph_inputs_.count(n.input(input)))
        fail_node(n, "input " + std::to_string(input) + " ('" + n.input(input) +
                         "') is a constant or parameter where mnemo needs a computed tensor");
      fail_node(n, "input '" + n.input(input) + "' is produced by no earlier node");
    }
    return it->second;
  }
  std::string add(const onnx::NodeProto& n, const std::string& op, std::vector<std::string> inputs, Attrs attrs,
                  int output = 0, const std::string& suffix = "") {
    const std::string name = unique(sanitize(n.output(output)) + suffix);
    nodes_.push_back({name, op, std::move(inputs), std::move(attrs)});
    return name;
  }
  void convert(const onnx::NodeProto& n);
  std::vector<int64_t> symmetric_pads(const onnx::NodeProto& n) const {
    const std::string auto_pad = attr_string(n, "auto_pad", "NOTSET");
    if (auto_pad != "NOTSET") fail_node(n, "auto_pad " + auto_pad + " is not supported (export with explicit pads)");
    const std::vector<int64_t> p = attr_ints(n, "pads", {0, 0, 0, 0});
    if (p.size() != 4) fail_node(n, "pads must have 4 values (2-D), got " + std::to_string(p.size()));
    if (p[0] != p[2] || p[1] != p[3])
      fail_node(n, "asymmetric pads [" + std::to_string(p[0]) + "," + std::to_string(p[1]) + "," + std::to_string(p[2]) + "," +
                       std::to_string(p[3]) + "] are not supported (mnemo pads both sides alike)");
    return {p[0], p[1]};
  }
  std::vector<int64_t> pair_attr(const onnx::NodeProto& n, const std::string& name, int64_t dflt) const {
    std::vector<int64_t> v = attr_ints(n, name, {dflt, dflt});
    if (v.size() != 2) fail_node(n, name + " must have 2 values (2-D), got " + std::to_string(v.size()));
    return v;
  }

  std::string file_;
  onnx::ModelProto& m_;
  OnnxImportOptions opt_;
  std::map<std::string, Shape> shapes_;
  std::map<std::string, const onnx::TensorProto*> consts_;
  std::set<std::string> graph_inputs_;     // structure-only parameters (graph inputs after the data)
  std::map<std::string, std::string> refs_;  // ONNX value -> mnemo reference ("node" or "node:k")
  std::map<std::string, std::string> param_names_;  // ONNX value -> mnemo parameter name
  std::map<std::string, size_t> fc_of_;    // ONNX value produced by a bias-less fully_connected -> node index
  std::map<std::string, int> uses_;        // ONNX value -> how many node inputs and graph outputs read it
  std::set<std::string> used_{"data", "labels", "loss", "rng/step"};
  std::vector<ParamOut> params_;
  std::vector<NodeOut> nodes_;
  int unused_bn_outputs_ = 0, dropout_masks_ = 0;
  OnnxImport out_;
};

int64_t Importer::element_count(const onnx::TensorProto& t, const std::string& what) const {
  if (t.data_location() == onnx::TensorProto::EXTERNAL)
    MNEMO_FAIL() << file_ << ": tensor '" << printable(what) << "' keeps its data in an external file, which mnemo does not read "
                 << "(save the model with its data inside, e.g. onnx.save(model, path, save_as_external_data=False))";
  int64_t n = 1;
  for (int64_t d : t.dims()) {
    if (d < 0 || (d > 0 && n > (int64_t{1} << 40) / d))
      MNEMO_FAIL() << file_ << ": tensor '" << printable(what) << "' has a negative dimension or more than 2^40 elements";
    n *= d;
  }
  return n;
}

std::vector<double> Importer::values(const onnx::TensorProto& t, const std::string& what) const {
  const int64_t n = element_count(t, what);
  std::vector<double> v;
  const std::string& raw = t.raw_data();
  auto from_raw = [&]<class T>() {
    if (raw.size() != static_cast<size_t>(n) * sizeof(T))
      MNEMO_FAIL() << file_ << ": tensor '" << printable(what) << "' has " << raw.size() << " bytes of data for " << n << " elements";
    v.reserve(static_cast<size_t>(n));
    for (int64_t i = 0; i < n; ++i) {
      T x;
      std::memcpy(&x, raw.data() + i * sizeof(T), sizeof(T));
      v.push_back(static_cast<double>(x));
    }
  };
  switch (t.data_type()) {
    case onnx::TensorProto::FLOAT:
      if (!raw.empty()) from_raw.template operator()<float>();
      else for (float x : t.float_data()) v.push_back(x);
      break;
    case onnx::TensorProto::DOUBLE:
      if (!raw.empty()) from_raw.template operator()<double>();
      else for (double x : t.double_data()) v.push_back(x);
      break;
    case onnx::TensorProto::INT64:
      if (!raw.empty()) from_raw.template operator()<int64_t>();
      else for (int64_t x : t.int64_data()) v.push_back(static_cast<double>(x));
      break;
    case onnx::TensorProto::INT32:
      if (!raw.empty()) from_raw.template operator()<int32_t>();
      else for (int32_t x : t.int32_data()) v.push_back(x);
      break;
    default:
      MNEMO_FAIL() << file_ << ": tensor '" << printable(what) << "' has ONNX data type " << t.data_type()
                   << "; mnemo reads float, double, int64 and int32 tensors";
  }
  if (static_cast<int64_t>(v.size()) != n)
    MNEMO_FAIL() << file_ << ": tensor '" << printable(what) << "' holds " << v.size() << " values for its " << n << " elements";
  return v;
}

std::vector<int64_t> Importer::ints(const onnx::TensorProto& t, const std::string& what) const {
  const bool i64 = t.data_type() == onnx::TensorProto::INT64, i32 = t.data_type() == onnx::TensorProto::INT32;
  if (!i64 && !i32) {
    std::vector<int64_t> out;
    for (double v : values(t, what)) {
      if (!std::isfinite(v)) MNEMO_FAIL() << file_ << ": tensor '" << printable(what) << "' holds " << v << " where an integer is needed";
      out.push_back(static_cast<int64_t>(std::clamp(v, -4.6e18, 4.6e18)));
    }
    return out;
  }
  const int64_t n = element_count(t, what);
  const std::string& raw = t.raw_data();
  std::vector<int64_t> out;
  if (!raw.empty()) {
    const size_t width = i64 ? 8 : 4;
    if (raw.size() != static_cast<size_t>(n) * width)
      MNEMO_FAIL() << file_ << ": tensor '" << printable(what) << "' has " << raw.size() << " bytes of data for " << n << " elements";
    for (int64_t i = 0; i < n; ++i) {
      if (i64) {
        int64_t x;
        std::memcpy(&x, raw.data() + i * 8, 8);
        out.push_back(x);
      } else {
        int32_t x;
        std::memcpy(&x, raw.data() + i * 4, 4);
        out.push_back(x);
      }
    }
  } else if (i64) {
    out.assign(t.int64_data().begin(), t.int64_data().end());
  } else {
    out.assign(t.int32_data().begin(), t.int32_data().end());
  }
  if (static_cast<int64_t>(out.size()) != n)
    MNEMO_FAIL() << file_ << ": tensor '" << printable(what) << "' holds " << out.size() << " values for its " << n << " elements";
  return out;
}

std::string Importer::param(const onnx::NodeProto& n, int input, Role role, bool transpose) {
  if (!has_input(n, input)) fail_node(n, "input " + std::to_string(input) + " is missing");
  const std::string& value = n.input(input);
  const std::string key = transpose ? value + "\n(transposed)" : value;  // a weight read both ways is two params
  auto done = param_names_.find(key);
  if (done != param_names_.end()) return done->second;
  const onnx::TensorProto* t = constant(value);
  Shape shape;
  if (t) {
    shape.assign(t->dims().begin(), t->dims().end());
    if (t->name() != value && shapes_.count(value)) shape = shapes_.at(value);  // a copy (Identity) keeps the shape
  } else if (graph_inputs_.count(value)) {
    shape = shape_of(value);
    if (shape.empty()) fail_node(n, "parameter input '" + value + "' has no fixed shape");
  } else {
    fail_node(n, "input " + std::to_string(input) + " ('" + value + "') must be a parameter (an initializer or a graph input), "
                 "but it is computed by the graph");
  }
  if (transpose) {
    if (shape.size() != 2) fail_node(n, "the weight to transpose must be 2-D, got " + shape_str(shape));
    std::swap(shape[0], shape[1]);
  }
  ParamOut p;
  p.name = unique(sanitize(value));
  p.shape = shape;
  int64_t fan_in = 1;
  for (size_t k = 1; k < shape.size(); ++k) fan_in *= shape[k];
  switch (role) {
    case Role::weight:
      p.init = shape.size() == 4 ? "normal" : "uniform";
      p.scale = shape.size() == 4 ? std::sqrt(2.0 / static_cast<double>(fan_in)) : 1.0 / std::sqrt(static_cast<double>(fan_in));
      break;
    case Role::bias: p.init = "zeros"; break;
    case Role::gamma: p.init = "ones"; break;
    case Role::beta: p.init = "zeros"; break;
    case Role::running_mean: p.init = "zeros", p.trainable = false; break;
    case Role::running_var: p.init = "ones", p.trainable = false; break;
  }
  if (t) {
    const std::vector<double> v = values(*t, value);
    if (static_cast<int64_t>(v.size()) != numel(shape))
      fail_node(n, "parameter '" + value + "' holds " + std::to_string(v.size()) + " values for its shape " + shape_str(shape));
    Tensor w(DType::f32, shape);
    float* d = w.as<float>();
    if (transpose) {  // stored [in, out] in ONNX, [out, in] in mnemo
      const int64_t rows = shape[1], cols = shape[0];
      for (int64_t r = 0; r < rows; ++r)
        for (int64_t c = 0; c < cols; ++c) d[c * rows + r] = static_cast<float>(v[static_cast<size_t>(r * cols + c)]);
    } else {
      for (size_t i = 0; i < v.size(); ++i) d[i] = static_cast<float>(v[i]);
    }
    out_.weights.emplace_back(p.name, std::move(w));
  }
  param_names_[key] = p.name;
  params_.push_back(p);
  return p.name;
}

void Importer::convert(const onnx::NodeProto& n) {
  const std::string& op = n.op_type();
  if (!n.domain().empty() && n.domain() != "ai.onnx")
    fail_node(n, "operator domain '" + n.domain() + "' is not the standard ONNX domain");
  if (n.output_size() < 1 || n.output(0).empty()) fail_node(n, "the node has no output");
  // ONNX is in SSA form: a value made twice (or a node output named like an input or initializer)
  // is an invalid model (it was imported with the later one renamed).
  for (const std::string& o : n.output())
    if (!o.empty() && (refs_.count(o) || consts_.count(o)))
      fail_node(n, "its output '" + printable(o) + "' is already a graph input, initializer or another node's output (ONNX names each value once)");
  auto need = [&](int k) {
    for (int i = 0; i < k; ++i)
      if (!has_input(n, i)) fail_node(n, "needs " + std::to_string(k) + " input(s), input " + std::to_string(i) + " is missing");
  };
  if (op != "Constant") need(1);
  if (op == "Conv" || op == "Gemm" || op == "MatMul" || op == "Add" || op == "Mul" || op == "Reshape") need(2);
  if (op == "Slice") need(3);
  if (op == "BatchNormalization") need(5);
  auto out = [&](const std::string& name, int k = 0) { refs_[n.output(k)] = name; };
  if (op == "Constant") {
    const auto* a = attr(n, "value");
    if (!a || !a->has_t()) fail_node(n, "only Constant nodes with a tensor 'value' are supported");
    consts_[n.output(0)] = &a->t();
    return;
  }
  if ((op == "Identity" || op == "Cast") && (constant(n.input(0)) || graph_inputs_.count(n.input(0)))) {
    // A copy of a parameter or constant. Exporters emit Identity nodes when they merge initializers
    // of equal values (a structure-only export merges every all-ones batch-norm weight and running
    // variance): the output is a parameter of its own, named after it, with the source's shape and
    // data. Cast of a constant: its values (mnemo reads constants as numbers whatever their type).
    if (const onnx::TensorProto* t = constant(n.input(0))) consts_[n.output(0)] = t;
    if (graph_inputs_.count(n.input(0))) graph_inputs_.insert(n.output(0));
    auto it = shapes_.find(n.input(0));
    if (it != shapes_.end()) shapes_[n.output(0)] = it->second;
    return;
  }
  if (op == "Cast") {
    if (attr_int(n, "to", 0) != onnx::TensorProto::FLOAT) fail_node(n, "only casts to float of computed tensors are supported");
    out(add(n, "identity", {ref(n, 0)}, {}));
    return;
  }
  if (op == "Conv") {
    const std::string w = param(n, 1, Role::weight);
    Attrs a{{"stride", pair_attr(n, "strides", 1)}, {"padding", symmetric_pads(n)}, {"dilation", pair_attr(n, "dilations", 1)}};
    if (const int64_t g = attr_int(n, "group", 1); g != 1) a["groups"] = g;
    // kernel_shape, where given, must be the weight's (mnemo takes the kernel from the weight).
    if (const std::vector<int64_t> k = attr_ints(n, "kernel_shape", {}); !k.empty()) {
      Shape ws = shape_of(n.input(1));
      if (const onnx::TensorProto* t = ws.empty() ? constant(n.input(1)) : nullptr) ws.assign(t->dims().begin(), t->dims().end());
      if (k.size() != 2) fail_node(n, "kernel_shape must have 2 values (2-D convolution), got " + std::to_string(k.size()));
      if (ws.size() == 4 && (k[0] != ws[2] || k[1] != ws[3]))
        fail_node(n, "kernel_shape [" + std::to_string(k[0]) + "," + std::to_string(k[1]) + "] is not the weight's " +
                         shape_str(ws) + " kernel");
    }
    std::vector<std::string> in{ref(n, 0), w};
    if (has_input(n, 2)) in.push_back(param(n, 2, Role::bias));
    out(add(n, "conv2d", in, a));
  } else if (op == "BatchNormalization") {
    std::vector<std::string> in{ref(n, 0), param(n, 1, Role::gamma), param(n, 2, Role::beta), param(n, 3, Role::running_mean),
                                param(n, 4, Role::running_var)};
    for (int k = 1; k < n.output_size(); ++k)
      if (!n.output(k).empty()) ++unused_bn_outputs_;
    // (checked here, in ONNX's terms: the config's momentum is 1 - ONNX's)
    const double momentum = attr_float(n, "momentum", 0.9);
    if (!(momentum >= 0 && momentum <= 1)) fail_node(n, "momentum must be in [0, 1], got " + std::to_string(momentum));
    out(add(n, "batch_norm", in, {{"eps", attr_float(n, "epsilon", 1e-5)}, {"momentum", 1.0 - momentum}}));
  } else if (op == "Relu" || op == "Sigmoid" || op == "Tanh" || op == "Identity") {
    const std::string mop = op == "Relu" ? "relu" : op == "Sigmoid" ? "sigmoid" : op == "Tanh" ? "tanh" : "identity";
    out(add(n, mop, {ref(n, 0)}, {}));
  } else if (op == "Clip") {
    double lo = -INFINITY, hi = INFINITY;
    if (attr(n, "min")) lo = attr_float(n, "min", lo);
    if (attr(n, "max")) hi = attr_float(n, "max", hi);
    for (int k : {1, 2})
      if (has_input(n, k)) {
        const onnx::TensorProto* t = constant(n.input(k));
        if (!t) fail_node(n, "input " + std::to_string(k) + " (the bound) must be a constant");
        const std::vector<double> v = values(*t, n.input(k));
        if (v.size() != 1) fail_node(n, "a bound must be one value");
        (k == 1 ? lo : hi) = v[0];
      }
    if (std::isnan(lo) || std::isnan(hi)) fail_node(n, std::string("its ") + (std::isnan(lo) ? "min" : "max") + " bound is NaN");
    Attrs a;
    if (std::isfinite(lo)) a["min"] = lo;
    if (std::isfinite(hi)) a["max"] = hi;
    out(add(n, "clip", {ref(n, 0)}, a));
  } else if (op == "MaxPool" || op == "AveragePool") {
    if (n.output_size() > 1 && !n.output(1).empty()) fail_node(n, "the indices output of MaxPool is not supported");
    const std::vector<int64_t> k = attr_ints(n, "kernel_shape", {});
    if (k.size() != 2) fail_node(n, "kernel_shape must have 2 values (2-D pooling)");
    for (int64_t d : attr_ints(n, "dilations", {1, 1}))
      if (d != 1) fail_node(n, "dilated pooling is not supported");
    Attrs a{{"kernel", k}, {"stride", pair_attr(n, "strides", 1)}, {"padding", symmetric_pads(n)}};
    if (attr_int(n, "ceil_mode", 0)) a["ceil_mode"] = true;
    if (op == "AveragePool") a["count_include_pad"] = attr_int(n, "count_include_pad", 0) != 0;
    out(add(n, op == "MaxPool" ? "max_pool2d" : "avg_pool2d", {ref(n, 0)}, a));
  } else if (op == "GlobalAveragePool") {
    const Shape s = shape_of(n.input(0));
    if (s.size() != 4) fail_node(n, "needs a 4-D input of known shape (ONNX's shape inference gave " + shape_str(s) + ")");
    const std::string pooled = add(n, "global_avg_pool", {ref(n, 0)}, {}, 0, "/pool");
    out(add(n, "reshape", {pooled}, {{"shape", std::vector<int64_t>{s[0], s[1], 1, 1}}}));
  } else if (op == "ReduceMean") {
    // The mean over H and W of a 4-D tensor (the dynamo exporter's adaptive average pool to 1x1).
    std::vector<int64_t> axes = has_input(n, 1) ? const_ints(n, 1) : attr_ints(n, "axes", {});
    for (int64_t& a : axes)
      if (a < 0) a += 4;
    std::sort(axes.begin(), axes.end());
    const Shape s = shape_of(n.input(0));
    if (axes != std::vector<int64_t>{2, 3} || (!s.empty() && s.size() != 4))
      fail_node(n, "only the mean over axes 2 and 3 (H and W) of a 4-D tensor is supported");
    const bool keep = attr_int(n, "keepdims", 1) != 0;
    const std::string pooled = add(n, "global_avg_pool", {ref(n, 0)}, {}, 0, keep ? "/pool" : "");
    if (!keep) {
      out(pooled);
    } else {
      if (s.size() != 4) fail_node(n, "needs a 4-D input of known shape (ONNX's shape inference gave " + shape_str(s) + ")");
      out(add(n, "reshape", {pooled}, {{"shape", std::vector<int64_t>{s[0], s[1], 1, 1}}}));
    }
  } else if (op == "Flatten") {
    out(add(n, "flatten", {ref(n, 0)}, {{"axis", attr_int(n, "axis", 1)}}));
  } else if (op == "Reshape") {
    std::vector<int64_t> shape = const_ints(n, 1);
    const Shape in = shape_of(n.input(0));
    for (size_t k = 0; k < shape.size(); ++k)
      if (shape[k] == 0) {
        if (attr_int(n, "allowzero", 0) || k >= in.size()) fail_node(n, "a 0 in the target shape needs the input's dim");
        shape[k] = in[k];
      }
    out(add(n, "reshape", {ref(n, 0)}, {{"shape", shape}}));
  } else if (op == "Gemm") {
    if (attr_float(n, "alpha", 1) != 1 || attr_float(n, "beta", 1) != 1 || attr_int(n, "transA", 0) != 0)
      fail_node(n, "only Gemm with alpha = beta = 1 and transA = 0 (a linear layer) is supported");
    std::vector<std::string> in{ref(n, 0), param(n, 1, Role::weight, attr_int(n, "transB", 0) == 0)};
    if (has_input(n, 2)) in.push_back(param(n, 2, Role::bias));
    out(add(n, "fully_connected", in, {}));
  } else if (op == "MatMul") {
    const std::string w = param(n, 1, Role::weight, true);
    out(add(n, "fully_connected", {ref(n, 0), w}, {}));
    fc_of_[n.output(0)] = nodes_.size() - 1;
  } else if (op == "Add" || op == "Mul") {
    // MatMul followed by the Add of a 1-D parameter: that parameter is the layer's bias.
    if (op == "Add")
      for (int k : {0, 1}) {
        auto fc = fc_of_.find(n.input(k));
        const std::string& other = n.input(1 - k);
        if (fc == fc_of_.end() || !(constant(other) || graph_inputs_.count(other))) continue;
        if (uses_[n.input(k)] != 1) continue;  // the product is read elsewhere too: keep it bias-free
        const onnx::TensorProto* t = constant(other);
        const Shape bs = t ? Shape(t->dims().begin(), t->dims().end()) : shape_of(other);
        if (bs.size() != 1) continue;
        NodeOut& f = nodes_[fc->second];
        f.inputs.push_back(param(n, 1 - k, Role::bias));
        fc_of_.erase(fc);
        out(f.name);
        return;
      }
    for (int k : {0, 1})
      if (constant(n.input(k)) || graph_inputs_.count(n.input(k)))
        fail_node(n, "adding or multiplying by a constant or parameter tensor is not supported (only computed tensors "
                     "of one shape)");
    const Shape a = shape_of(n.input(0)), b = shape_of(n.input(1));
    if (!a.empty() && !b.empty() && a != b)
      fail_node(n, "inputs of shapes " + shape_str(a) + " and " + shape_str(b) + " need broadcasting, which mnemo does not do");
    out(add(n, op == "Add" ? "add" : "mul", {ref(n, 0), ref(n, 1)}, {}));
  } else if (op == "Concat") {
    std::vector<std::string> in;
    for (int k = 0; k < n.input_size(); ++k) in.push_back(ref(n, k));
    out(add(n, "concat", in, {{"axis", attr_int(n, "axis", 0)}}));
  } else if (op == "Split") {
    std::vector<int64_t> sizes = has_input(n, 1) ? const_ints(n, 1) : attr_ints(n, "split", {});
    Attrs a{{"axis", attr_int(n, "axis", 0)}};
    if (!sizes.empty()) a["sizes"] = sizes;
    else a["parts"] = static_cast<int64_t>(n.output_size());
    const std::string name = add(n, "split", {ref(n, 0)}, a);
    for (int k = 0; k < n.output_size(); ++k) out(name + ":" + std::to_string(k), k);
  } else if (op == "Slice") {
    const std::vector<int64_t> starts = const_ints(n, 1), ends = const_ints(n, 2);
    const std::vector<int64_t> axes = has_input(n, 3) ? const_ints(n, 3) : std::vector<int64_t>{0};
    const std::vector<int64_t> steps = has_input(n, 4) ? const_ints(n, 4) : std::vector<int64_t>{1};
    if (starts.size() != 1 || ends.size() != 1 || axes.size() != 1 || steps.size() != 1 || steps[0] != 1)
      fail_node(n, "only slices along one axis with step 1 are supported");
    const Shape in = shape_of(n.input(0));
    int64_t axis = axes[0], begin = starts[0], end = ends[0];
    if (!in.empty()) {  // ONNX's rules: negative axis and indices count from the end, indices are clamped
      const int64_t rank = static_cast<int64_t>(in.size());
      if (axis < -rank || axis >= rank) fail_node(n, "axis " + std::to_string(axis) + " is outside the input's rank " + std::to_string(rank));
      if (axis < 0) axis += rank;
      const int64_t extent = in[static_cast<size_t>(axis)];
      auto clamp_index = [&](int64_t i) { return std::clamp(i < 0 ? std::max<int64_t>(i, -extent) + extent : i, int64_t{0}, extent); };
      begin = clamp_index(begin), end = clamp_index(end);
      if (begin >= end) fail_node(n, "the slice [" + std::to_string(starts[0]) + ", " + std::to_string(ends[0]) + ") of axis " +
                                         std::to_string(axis) + " (extent " + std::to_string(extent) + ") is empty");
      if (end == extent) end = INT64_MAX;
    }
    Attrs a{{"axis", axis}, {"begin", begin}};
    if (end < INT64_MAX) a["end"] = end;  // else: to the end
    out(add(n, "slice", {ref(n, 0)}, a));
  } else if (op == "Dropout") {
    double p = attr_float(n, "ratio", 0.5);
    if (has_input(n, 1)) {
      const onnx::TensorProto* t = constant(n.input(1));
      if (!t) fail_node(n, "the ratio input must be a constant");
      const std::vector<double> r = values(*t, n.input(1));
      if (r.size() != 1) fail_node(n, "the ratio input must hold one value");
      p = r[0];
    }
    if (n.output_size() > 1 && !n.output(1).empty()) ++dropout_masks_;
    out(add(n, "dropout", {ref(n, 0)}, {{"p", p}}));
  } else {
    fail_node(n, "unsupported ONNX operator; mnemo imports Conv, BatchNormalization, Relu, Clip, Sigmoid, Tanh, MaxPool, "
                 "AveragePool, GlobalAveragePool, ReduceMean (over H, W), Gemm, MatMul (+ Add of a bias), Flatten, Reshape, "
                 "Concat, Split, Slice, Add, Mul, Dropout, Identity, Cast and Constant");
  }
}

void emit_attr(YAML::Emitter& e, const AttrValue& v) {
  std::visit([&](const auto& x) {
    using T = std::decay_t<decltype(x)>;
    if constexpr (std::is_same_v<T, std::vector<int64_t>>) {
      e << YAML::Flow << YAML::BeginSeq;
      for (int64_t i : x) e << i;
      e << YAML::EndSeq;
    } else if constexpr (std::is_same_v<T, double>) {
      std::ostringstream os;
      os.precision(17);
      os << x;
      std::string s = os.str();
      if (s.find_first_of(".eEn") == std::string::npos) s += ".0";  // stays a float when read back
      e << s;
    } else {
      e << x;
    }
  }, v);
}

OnnxImport Importer::run() {
  onnx::GraphProto& g = *m_.mutable_graph();
  for (const auto& t : g.initializer()) consts_[t.name()] = &t;
  // The data input: the first graph input that is not an initializer; the others are parameters
  // of a structure-only export.
  const onnx::ValueInfoProto* data = nullptr;
  for (auto& v : *g.mutable_input()) {
    if (consts_.count(v.name())) continue;
    if (!data) {
      data = &v;
      if (opt_.batch > 0) {  // the batch asked for, before shape inference
        auto* dims = v.mutable_type()->mutable_tensor_type()->mutable_shape();
        if (dims->dim_size() > 0) dims->mutable_dim(0)->set_dim_value(opt_.batch);
      }
    } else {
      graph_inputs_.insert(v.name());
    }
  }
  if (!data) MNEMO_FAIL() << file_ << ": the graph has no input besides its initializers (nothing to feed the data to)";
  if (opt_.batch > 0) {  // the batch asked for: outputs follow it, earlier inferred shapes are dropped
    for (auto& v : *g.mutable_output()) {
      auto* dims = v.mutable_type()->mutable_tensor_type()->mutable_shape();
      if (dims->dim_size() > 0) dims->mutable_dim(0)->set_dim_value(opt_.batch);
    }
    g.clear_value_info();
  }
  // ONNX's own shape inference divides by strides and dilations without checking them (a stride
  // of 0 in a Conv or a pooling node ended the process with SIGFPE there): checked first.
  for (const auto& n : g.node())
    for (const char* name : {"strides", "dilations", "kernel_shape"})
      if (const auto* a = attr(n, name))
        for (int64_t v : a->ints())
          if (v < 1) fail_node(n, std::string(name) + " must be >= 1, got " + std::to_string(v));
  try {
    onnx::shape_inference::InferShapes(m_);
  } catch (const std::exception& e) {
    out_.notes.push_back(std::string("ONNX shape inference failed (") + e.what() + "); shapes are inferred by mnemo only");
  }
  for (const auto& v : g.input()) record_shapes(v);
  for (const auto& v : g.value_info()) record_shapes(v);
  for (const auto& v : g.output()) record_shapes(v);
  const Shape data_shape = shape_of(data->name());
  if (data_shape.size() < 2)
    MNEMO_FAIL() << file_ << ": the data input '" << printable(data->name()) << "' needs a fixed shape [N, ...]"
                 << (opt_.batch ? "" : " (give the batch size with --batch if the model leaves it open)");
  refs_[data->name()] = "data";
  for (const auto& n : g.node())
    for (const auto& in : n.input()) ++uses_[in];
  for (const auto& o : g.output()) ++uses_[o.name()];
  for (const auto& n : g.node()) convert(n);
  if (g.output_size() != 1)
    MNEMO_FAIL() << file_ << ": the graph has " << g.output_size() << " outputs; mnemo imports classifiers with one [N, C] output";
  const std::string& out_name = g.output(0).name();
  const Shape logits_shape = shape_of(out_name);
  if (logits_shape.size() != 2 || logits_shape[0] != data_shape[0])
    MNEMO_FAIL() << file_ << ": the output '" << printable(out_name) << "' has shape " << shape_str(logits_shape)
                 << "; mnemo imports classifiers whose one output is [N, C] logits (N = the data's batch " << data_shape[0] << ")";
  // What a training config needs of them, named here (the config's own checks named the YAML file
  // about to be written, and its line).
  if (data_shape[0] < 1)
    MNEMO_FAIL() << file_ << ": the data input '" << printable(data->name()) << "' has a batch of " << data_shape[0]
                 << "; training needs at least 1 (give one with --batch)";
  if (logits_shape[1] < 2)
    MNEMO_FAIL() << file_ << ": the output '" << printable(out_name) << "' has " << logits_shape[1]
                 << " class(es) (shape " << shape_str(logits_shape) << "); a softmax classifier needs at least 2";
  auto lit = refs_.find(out_name);
  if (lit == refs_.end() || lit->second == "data" || lit->second.find(':') != std::string::npos)
    MNEMO_FAIL() << file_ << ": the output '" << printable(out_name) << "' must be the first output of a node";
  if (unused_bn_outputs_)
    out_.notes.push_back("BatchNormalization's running-statistics outputs (a training-mode export) are not used: mnemo "
                         "updates the running statistics itself");
  if (dropout_masks_) out_.notes.push_back("Dropout's mask outputs are not used");

  YAML::Emitter e;
  e << YAML::Comment("Imported from " + file_ + " by mnemo import (docs/FORMATS.md): a graph model with a softmax "
                     "cross-entropy loss on its output");
  e << YAML::BeginMap << YAML::Key << "model" << YAML::Value << YAML::BeginMap;
  e << YAML::Key << "type" << YAML::Value << "graph";
  e << YAML::Key << "inputs" << YAML::Value << YAML::BeginMap;
  e << YAML::Key << "data" << YAML::Value << YAML::Flow << YAML::BeginMap << YAML::Key << "shape" << YAML::Value << YAML::Flow
    << YAML::BeginSeq;
  for (int64_t d : data_shape) e << d;
  e << YAML::EndSeq << YAML::EndMap;
  e << YAML::Key << "labels" << YAML::Value << YAML::Flow << YAML::BeginMap << YAML::Key << "shape" << YAML::Value << YAML::Flow
    << YAML::BeginSeq << data_shape[0] << YAML::EndSeq << YAML::Key << "dtype" << YAML::Value << "int32" << YAML::EndMap;
  e << YAML::EndMap;
  e << YAML::Key << "params" << YAML::Value << YAML::BeginMap;
  for (const ParamOut& p : params_) {
    e << YAML::Key << p.name << YAML::Value << YAML::Flow << YAML::BeginMap << YAML::Key << "shape" << YAML::Value << YAML::Flow
      << YAML::BeginSeq;
    for (int64_t d : p.shape) e << d;
    e << YAML::EndSeq << YAML::Key << "init" << YAML::Value << p.init;
    if (p.init == "normal" || p.init == "uniform") {
      e << YAML::Key << "scale" << YAML::Value;
      emit_attr(e, p.scale);
    }
    if (!p.trainable) e << YAML::Key << "trainable" << YAML::Value << false;
    e << YAML::EndMap;
  }
  e << YAML::EndMap;
  e << YAML::Key << "nodes" << YAML::Value << YAML::BeginSeq;
  for (const NodeOut& n : nodes_) {
    e << YAML::Flow << YAML::BeginMap << YAML::Key << "name" << YAML::Value << n.name << YAML::Key << "op" << YAML::Value << n.op;
    e << YAML::Key << "inputs" << YAML::Value << YAML::Flow << YAML::BeginSeq;
    for (const std::string& i : n.inputs) e << i;
    e << YAML::EndSeq;
    if (!n.attrs.empty()) {
      e << YAML::Key << "attrs" << YAML::Value << YAML::Flow << YAML::BeginMap;
      for (const auto& [k, v] : n.attrs) {
        e << YAML::Key << k << YAML::Value;
        emit_attr(e, v);
      }
      e << YAML::EndMap;
    }
    e << YAML::EndMap;
  }
  e << YAML::Flow << YAML::BeginMap << YAML::Key << "name" << YAML::Value << "loss" << YAML::Key << "op" << YAML::Value
    << "softmax_cross_entropy" << YAML::Key << "inputs" << YAML::Value << YAML::Flow << YAML::BeginSeq << lit->second << "labels"
    << YAML::EndSeq << YAML::EndMap;
  e << YAML::EndSeq;
  e << YAML::Key << "loss" << YAML::Value << "loss" << YAML::Key << "logits" << YAML::Value << lit->second;
  e << YAML::EndMap;
  e << YAML::Key << "data" << YAML::Value << YAML::BeginMap;
  e << YAML::Key << "source" << YAML::Value << "synthetic";
  e << YAML::Key << "classes" << YAML::Value << logits_shape[1];
  e << YAML::Key << "batch" << YAML::Value << data_shape[0];
  e << YAML::EndMap;
  e << YAML::Key << "optimizer" << YAML::Value << YAML::Flow << YAML::BeginMap << YAML::Key << "lr" << YAML::Value << "0.01"
    << YAML::Key << "momentum" << YAML::Value << "0.9" << YAML::EndMap;
  e << YAML::Key << "train" << YAML::Value << YAML::Flow << YAML::BeginMap << YAML::Key << "steps" << YAML::Value << opt_.steps
    << YAML::EndMap;
  e << YAML::EndMap;
  if (!e.good()) MNEMO_FAIL() << file_ << ": writing the config failed: " << e.GetLastError();
  out_.yaml = std::string(e.c_str()) + "\n";
  out_.nodes = static_cast<int64_t>(nodes_.size()) + 1;
  out_.params = static_cast<int64_t>(params_.size());
  return std::move(out_);
}

}  // namespace

bool is_onnx_path(const std::string& path) {
  return path.size() > 5 && path.compare(path.size() - 5, 5, ".onnx") == 0;
}

OnnxImport import_onnx(const std::string& path, const OnnxImportOptions& options) {
  std::ifstream f(path, std::ios::binary);
  if (!f) MNEMO_FAIL() << path << ": cannot open the ONNX file (" << std::strerror(errno) << ")";
  f.seekg(0, std::ios::end);
  const std::streamoff size = f.tellg();
  if (size <= 0) MNEMO_FAIL() << path << ": the ONNX file is empty";
  if (size >= kMaxOnnxBytes) MNEMO_FAIL() << path << ": the ONNX file is " << size << " bytes; protobuf reads at most 2 GiB";
  f.seekg(0);
  std::string bytes(static_cast<size_t>(size), '\0');
  if (!f.read(bytes.data(), size)) MNEMO_FAIL() << path << ": reading the ONNX file failed";
  onnx::ModelProto model;
  if (!model.ParseFromString(bytes) || !model.has_graph())
    MNEMO_FAIL() << path << ": not an ONNX model (protobuf could not parse a ModelProto with a graph)";
  return Importer(path, model, options).run();
}

}  // namespace mnemo
