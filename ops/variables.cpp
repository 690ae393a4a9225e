// Graph leaves and constants: input (bound each step), param (bound to the parameter store) and
// constant (a filled tensor: the loss seed, zero gradients).
//   input   {shape, dtype}                -> the bound tensor
//   param   {shape, dtype, trainable}     -> the bound tensor
//   constant{shape, dtype, value}         -> tensor filled with value
#include "ops/variables.h"

#include "ops/common.h"

namespace mnemo::ops {
namespace {

VariableParams read_type(AttrReader& r) {
  VariableParams p;
  auto shape = r.require_ints("shape");
  p.type.shape.assign(shape.begin(), shape.end());
  for (int64_t d : shape) MNEMO_CHECK(d >= 0) << "negative dimension in shape " << shape_str(p.type.shape);
  p.type.dtype = parse_dtype(r.get_string("dtype", "float32"));
  return p;
}
VariableParams parse_input(AttrReader& r) { return read_type(r); }
VariableParams parse_param(AttrReader& r) {
  VariableParams p = read_type(r);
  p.trainable = r.get_bool("trainable", true);
  MNEMO_CHECK(!p.trainable || is_float(p.type.dtype)) << "a trainable param must be float, got "
                                                      << dtype_name(p.type.dtype);
  return p;
}
VariableParams parse_constant(AttrReader& r) {
  VariableParams p = read_type(r);
  p.value = r.get_float("value", 0.0);
  return p;
}

std::vector<TensorType> infer_variable(const void* params, std::span<const TensorType>) {
  return {static_cast<const VariableParams*>(params)->type};
}

void constant_cpu(const KernelContext& c) {
  const auto& p = c.p<VariableParams>();
  const TensorView& y = c.out[0];
  switch (y.dtype()) {
    case DType::f32: std::fill_n(y.as<float>(), y.numel(), static_cast<float>(p.value)); break;
    case DType::f64: std::fill_n(y.as<double>(), y.numel(), p.value); break;
    case DType::i32: std::fill_n(y.as<int32_t>(), y.numel(), static_cast<int32_t>(p.value)); break;
  }
}

}  // namespace
}  // namespace mnemo::ops

MNEMO_REGISTER_OPS(variables) {
  using namespace mnemo;
  using namespace mnemo::ops;
  {
    OpDef d;
    d.name = "input";
    d.doc = "graph input bound each step (data, labels)";
    d.kind = OpKind::input;
    d.parse = parse_with(parse_input, "input");
    d.infer = infer_variable;
    registry.add(std::move(d));
  }
  {
    OpDef d;
    d.name = "param";
    d.doc = "parameter bound to the parameter store (trainable=false: state such as running statistics)";
    d.kind = OpKind::param;
    d.parse = parse_with(parse_param, "param");
    d.infer = infer_variable;
    registry.add(std::move(d));
  }
  {
    OpDef d;
    d.name = "constant";
    d.doc = "y = value everywhere";
    d.parse = parse_with(parse_constant, "constant");
    d.infer = infer_variable;
    d.cost = [](const void*, std::span<const TensorType>, std::span<const TensorType> out) {
      return Cost{0, static_cast<double>(out[0].bytes())};
    };
    d.cpu = constant_cpu;
    d.sample = OpSample{{{"shape", std::vector<int64_t>{2, 3}}, {"value", 1.5}}, {}};
    registry.add(std::move(d));
  }
}
