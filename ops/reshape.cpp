// Views that change only the shape: the output aliases the input's bytes (row-major order is
// unchanged), so no kernel runs and no memory is planned. Any dtype.
//   reshape(x) {shape: [d0, d1, ...], one entry may be -1 (inferred)}  y has numel(x) elements
//   flatten(x) {axis = 1}   x[d0..d(r-1)] -> y[prod(d0..d(axis-1)), prod(d(axis)..d(r-1))]
// grad of both: dx = reshape(dy) {shape: shape of x}.
#include "ops/common.h"

namespace mnemo::ops {
namespace {

struct ReshapeParams {
  std::vector<int64_t> shape;
};
struct FlattenParams {
  int64_t axis = 1;
};

ReshapeParams parse_reshape(AttrReader& r) {
  ReshapeParams p;
  p.shape = r.require_ints("shape");
  int unknown = 0;
  for (int64_t d : p.shape) {
    MNEMO_CHECK(d >= -1) << "reshape: dimension " << d << " in shape " << shape_str(p.shape)
                         << " is negative (only -1, meaning 'inferred', is allowed)";
    unknown += d == -1;
  }
  MNEMO_CHECK(unknown <= 1) << "reshape: at most one -1 in shape " << shape_str(p.shape) << ", got " << unknown;
  return p;
}
FlattenParams parse_flatten(AttrReader& r) { return {r.get_int("axis", 1)}; }

std::vector<TensorType> infer_reshape(const void* params, std::span<const TensorType> in) {
  const auto& p = *static_cast<const ReshapeParams*>(params);
  const int64_t n = in[0].numel();
  Shape shape = p.shape;
  int64_t known = 1;
  int free_dim = -1;
  for (size_t i = 0; i < shape.size(); ++i) {
    if (shape[i] == -1)
      free_dim = static_cast<int>(i);
    else
      MNEMO_CHECK(!__builtin_mul_overflow(known, shape[i], &known) && known <= kMaxElements)
          << "reshape: shape " << shape_str(shape) << " has more than 2^40 elements";
  }
  if (free_dim >= 0) {
    MNEMO_CHECK(known > 0 && n % known == 0) << "reshape: cannot reshape " << in[0].str() << " (" << n
                                             << " elements) to " << shape_str(p.shape) << ": " << n
                                             << " is not a multiple of " << known;
    shape[free_dim] = n / known;
  }
  MNEMO_CHECK(numel(shape) == n) << "reshape: cannot reshape " << in[0].str() << " (" << n << " elements) to "
                                 << shape_str(p.shape) << " (" << numel(shape) << " elements)";
  return {TensorType{in[0].dtype, shape}};
}

std::vector<TensorType> infer_flatten(const void* params, std::span<const TensorType> in) {
  const int64_t rank = static_cast<int64_t>(in[0].shape.size());
  int64_t axis = static_cast<const FlattenParams*>(params)->axis;
  MNEMO_CHECK(axis >= -rank && axis <= rank) << "flatten: axis " << axis << " is out of range for " << in[0].str()
                                             << " (expected " << -rank << ".." << rank << ")";
  if (axis < 0) axis += rank;
  int64_t outer = 1, inner = 1;
  for (int64_t i = 0; i < rank; ++i) (i < axis ? outer : inner) *= in[0].shape[i];
  return {TensorType{in[0].dtype, {outer, inner}}};
}

// dx = dy viewed with the input's shape.
std::vector<std::optional<EntryRef>> grad_reshape(Graph& g, const GradContext& c) {
  const Shape& s = g.type(c.inputs[0]).shape;
  return {g.add1("reshape", {*c.dout[0]}, {{"shape", std::vector<int64_t>(s.begin(), s.end())}})};
}

Cost no_cost(const void*, std::span<const TensorType>, std::span<const TensorType>) { return {}; }

}  // namespace
}  // namespace mnemo::ops

MNEMO_REGISTER_OPS(reshape) {
  using namespace mnemo;
  using namespace mnemo::ops;
  {
    OpDef d;
    d.name = "reshape";
    d.doc = "y = x with shape `shape` (one entry may be -1); a view";
    d.kind = OpKind::view;
    d.min_inputs = d.max_inputs = 1;
    d.parse = parse_with(parse_reshape, "reshape");
    d.infer = infer_reshape;
    d.grad = grad_reshape;
    d.cost = no_cost;
    d.sample = OpSample{{{"shape", std::vector<int64_t>{4, -1}}}, {TensorType{DType::f32, {2, 3, 4}}}};
    registry.add(std::move(d));
  }
  {
    OpDef d;
    d.name = "flatten";
    d.doc = "y = x viewed as [prod(dims before axis), prod(dims from axis)] (axis = 1); a view";
    d.kind = OpKind::view;
    d.min_inputs = d.max_inputs = 1;
    d.parse = parse_with(parse_flatten, "flatten");
    d.infer = infer_flatten;
    d.grad = grad_reshape;
    d.cost = no_cost;
    d.sample = OpSample{{}, {TensorType{DType::f32, {2, 3, 4, 5}}}};
    registry.add(std::move(d));
  }
}
