// Slicing, splitting and concatenating along one axis (any dtype; plain byte copies).
// A tensor is seen as [O, A, I]: O = prod(dims before axis), A = the axis extent, I = prod(dims after).
//   slice(x) {axis = 0, begin = 0, end = extent}   y = x[..., begin:end, ...]  (end exclusive;
//            negative axis/begin/end count from the back)
//       grad: slice_grad(dy) {axis, begin, input_shape}
//   slice_grad(dy) {axis, begin, input_shape}      dx = zeros(input_shape), dx[..., begin:begin+len, ...] = dy
//   split(x) {axis = 0, sizes: [s1..sk] | parts: k} y_j = consecutive pieces along axis (sum s_j = extent;
//            parts must divide the extent)
//       grad: dx = concat(dy_1..dy_k) (a zero constant for a piece without gradient)
//   concat(x1..xk) {axis = 0}                      y = the xi joined along axis (other dims equal)
//       grad: split(dy) {axis, sizes: the inputs' extents}
//   stack_rows(stack, x) {begin}                   y = stack with rows [begin, begin + rows of x) = x
//       (axis 0; in place on stack: a chain of them fills one buffer as its pieces are made, where a
//       concat at the end would keep every piece alive until then)
//       grad: stack_rows_grad(dy) {begin, rows}
//   stack_rows_grad(dy) {begin, rows}              dx = dy[begin:begin+rows] (a copy), dstack = dy
//       with those rows zero (in place on dy)
#include "ops/slice_concat.h"

#include <array>
#include <cstring>
#include <limits>

#include "ops/common.h"

namespace mnemo::ops {

int normalize_axis(int64_t axis, size_t rank, const char* op) {
  const int64_t r = static_cast<int64_t>(rank);
  MNEMO_CHECK(axis >= -r && axis < r) << op << ": axis " << axis << " is out of range for rank " << r
                                      << " (expected " << -r << ".." << r - 1 << ")";
  return static_cast<int>(axis < 0 ? axis + r : axis);
}

AxisLayout axis_layout(const Shape& s, int axis) {
  AxisLayout l;
  for (int i = 0; i < static_cast<int>(s.size()); ++i) {
    if (i < axis) l.outer *= s[i];
    if (i > axis) l.inner *= s[i];
  }
  l.extent = s.at(axis);
  return l;
}

namespace {

using Layout = AxisLayout;
Layout layout(const Shape& s, int axis) { return axis_layout(s, axis); }

// rows x len bytes from src (row stride src_stride) to dst (row stride dst_stride); src null: zeros.
void strided_copy(char* dst, int64_t dst_stride, const char* src, int64_t src_stride, int64_t rows, int64_t len) {
  if (len <= 0 || rows <= 0) return;
  parallel_range(rows * len, [&](int64_t lo, int64_t hi) {
    int64_t r = lo / len, off = lo % len;
    while (lo < hi) {
      const int64_t n = std::min(len - off, hi - lo);
      if (src)
        std::memcpy(dst + r * dst_stride + off, src + r * src_stride + off, static_cast<size_t>(n));
      else
        std::memset(dst + r * dst_stride + off, 0, static_cast<size_t>(n));
      lo += n;
      ++r;
      off = 0;
    }
  });
}

char* bytes_of(const TensorView& t) { return static_cast<char*>(t.data); }

// ---- slice ----

SliceParams parse_slice(AttrReader& r) {
  return {r.get_int("axis", 0), r.get_int("begin", 0), r.get_int("end", kToEnd)};
}

// (axis, begin, end) with negatives resolved against x's shape; checked.
std::array<int64_t, 3> resolve_slice(const SliceParams& p, const Shape& x) {
  MNEMO_CHECK(!x.empty()) << "slice: cannot slice a rank-0 tensor";
  const int axis = normalize_axis(p.axis, x.size(), "slice");
  const int64_t n = x[axis];
  const int64_t b = p.begin < 0 ? p.begin + n : p.begin;
  const int64_t e = p.end == kToEnd ? n : p.end < 0 ? p.end + n : p.end;
  MNEMO_CHECK(0 <= b && b < e && e <= n) << "slice: [begin, end) = [" << p.begin << ", "
                                         << (p.end == kToEnd ? std::string("end") : std::to_string(p.end))
                                         << ") is empty or outside axis " << axis << " of extent " << n
                                         << " (shape " << shape_str(x) << ")";
  return {axis, b, e};
}

std::vector<TensorType> infer_slice(const void* params, std::span<const TensorType> in) {
  auto [axis, b, e] = resolve_slice(*static_cast<const SliceParams*>(params), in[0].shape);
  TensorType y = in[0];
  y.shape[axis] = e - b;
  return {y};
}

void slice_cpu(const KernelContext& c) {
  auto [axis, b, e] = resolve_slice(c.p<SliceParams>(), c.in[0].shape());
  const Layout l = layout(c.in[0].shape(), static_cast<int>(axis));
  const int64_t row = l.inner * static_cast<int64_t>(dtype_size(c.in[0].dtype()));
  strided_copy(bytes_of(c.out[0]), (e - b) * row, bytes_of(c.in[0]) + b * row, l.extent * row, l.outer, (e - b) * row);
}

std::vector<std::optional<EntryRef>> grad_slice(Graph& g, const GradContext& c) {
  const Shape& x = g.type(c.inputs[0]).shape;
  auto [axis, b, e] = resolve_slice(c.p<SliceParams>(), x);
  return {g.add1("slice_grad", {*c.dout[0]},
                 {{"axis", axis}, {"begin", b}, {"input_shape", std::vector<int64_t>(x.begin(), x.end())}})};
}

// ---- slice_grad ----

SliceGradParams parse_slice_grad(AttrReader& r) {
  SliceGradParams p;
  p.axis = r.require_int("axis");
  p.begin = r.require_int("begin");
  auto s = r.require_ints("input_shape");
  p.input_shape.assign(s.begin(), s.end());
  return p;
}

std::vector<TensorType> infer_slice_grad(const void* params, std::span<const TensorType> in) {
  const auto& p = *static_cast<const SliceGradParams*>(params);
  const Shape& dy = in[0].shape;
  MNEMO_CHECK(dy.size() == p.input_shape.size()) << "slice_grad: dy " << in[0].str() << " and input_shape "
                                                 << shape_str(p.input_shape) << " differ in rank";
  const int axis = normalize_axis(p.axis, dy.size(), "slice_grad");
  for (size_t i = 0; i < dy.size(); ++i)
    MNEMO_CHECK(static_cast<int>(i) == axis || dy[i] == p.input_shape[i])
        << "slice_grad: dy " << in[0].str() << " and input_shape " << shape_str(p.input_shape)
        << " differ outside axis " << axis;
  MNEMO_CHECK(p.begin >= 0 && p.begin + dy[axis] <= p.input_shape[axis])
      << "slice_grad: begin " << p.begin << " + extent " << dy[axis] << " exceeds the input extent "
      << p.input_shape[axis] << " of axis " << axis;
  return {TensorType{in[0].dtype, p.input_shape}};
}

void slice_grad_cpu(const KernelContext& c) {
  const auto& p = c.p<SliceGradParams>();
  const int axis = normalize_axis(p.axis, p.input_shape.size(), "slice_grad");
  const Layout l = layout(p.input_shape, axis);
  const int64_t row = l.inner * static_cast<int64_t>(dtype_size(c.out[0].dtype()));
  const int64_t len = c.in[0].dim(axis), stride = l.extent * row;
  char* dx = bytes_of(c.out[0]);
  strided_copy(dx, stride, nullptr, 0, l.outer, p.begin * row);
  strided_copy(dx + p.begin * row, stride, bytes_of(c.in[0]), len * row, l.outer, len * row);
  strided_copy(dx + (p.begin + len) * row, stride, nullptr, 0, l.outer, (l.extent - p.begin - len) * row);
}

// ---- split ----

SplitParams parse_split(AttrReader& r) {
  SplitParams p;
  p.axis = r.get_int("axis", 0);
  p.sizes = r.get_ints("sizes", {});
  p.parts = r.get_int("parts", 0);
  MNEMO_CHECK(p.sizes.empty() != (p.parts == 0)) << "split: give exactly one of `sizes` (a list) or `parts` (a count)";
  MNEMO_CHECK(p.parts >= 0 && p.parts <= 65536) << "split: parts must be in [1, 65536], got " << p.parts;
  MNEMO_CHECK(p.sizes.size() <= 65536) << "split: at most 65536 sizes, got " << p.sizes.size();
  for (int64_t s : p.sizes)
    MNEMO_CHECK(s > 0 && s <= kMaxElements) << "split: sizes must be in [1, 2^40], got " << shape_str(p.sizes);
  return p;
}

std::vector<TensorType> infer_split(const void* params, std::span<const TensorType> in) {
  const auto& p = *static_cast<const SplitParams*>(params);
  MNEMO_CHECK(!in[0].shape.empty()) << "split: cannot split a rank-0 tensor";
  const int axis = normalize_axis(p.axis, in[0].shape.size(), "split");
  const int64_t n = in[0].shape[axis];
  std::vector<int64_t> sizes = p.sizes;
  if (sizes.empty()) {
    MNEMO_CHECK(n % p.parts == 0) << "split: " << p.parts << " parts do not divide extent " << n << " of axis "
                                  << axis << " of " << in[0].str();
    sizes.assign(static_cast<size_t>(p.parts), n / p.parts);
  }
  int64_t total = 0;
  for (int64_t s : sizes) total += s;
  MNEMO_CHECK(total == n) << "split: sizes " << shape_str(sizes) << " sum to " << total << ", but axis " << axis
                          << " of " << in[0].str() << " has extent " << n;
  std::vector<TensorType> out;
  for (int64_t s : sizes) {
    TensorType t = in[0];
    t.shape[axis] = s;
    out.push_back(t);
  }
  return out;
}

void split_cpu(const KernelContext& c) {
  const int axis = normalize_axis(c.p<SplitParams>().axis, c.in[0].shape().size(), "split");
  const Layout l = layout(c.in[0].shape(), axis);
  const int64_t row = l.inner * static_cast<int64_t>(dtype_size(c.in[0].dtype()));
  int64_t offset = 0;
  for (const TensorView& y : c.out) {
    const int64_t s = y.dim(axis);
    strided_copy(bytes_of(y), s * row, bytes_of(c.in[0]) + offset * row, l.extent * row, l.outer, s * row);
    offset += s;
  }
}

std::vector<std::optional<EntryRef>> grad_split(Graph& g, const GradContext& c) {
  const int axis = normalize_axis(c.p<SplitParams>().axis, c.node.outputs[0].shape.size(), "split");
  bool any = false;
  for (const auto& d : c.dout) any |= d.has_value();
  if (!any) return {std::nullopt};
  std::vector<EntryRef> pieces;
  for (size_t j = 0; j < c.dout.size(); ++j) {
    if (c.dout[j]) {
      pieces.push_back(*c.dout[j]);
      continue;
    }
    const TensorType& t = c.node.outputs[j];
    pieces.push_back(g.add1("constant", {},
                            {{"shape", std::vector<int64_t>(t.shape.begin(), t.shape.end())},
                             {"dtype", std::string(dtype_name(t.dtype))},
                             {"value", 0.0}}));
  }
  return {g.add1("concat", pieces, {{"axis", int64_t{axis}}})};
}

// ---- concat ----

AxisParams parse_axis(AttrReader& r) { return {r.get_int("axis", 0)}; }

std::vector<TensorType> infer_concat(const void* params, std::span<const TensorType> in) {
  MNEMO_CHECK(!in[0].shape.empty()) << "concat: cannot concatenate rank-0 tensors";
  const int axis = normalize_axis(static_cast<const AxisParams*>(params)->axis, in[0].shape.size(), "concat");
  TensorType y = in[0];
  for (size_t i = 1; i < in.size(); ++i) {
    bool ok = in[i].dtype == in[0].dtype && in[i].shape.size() == in[0].shape.size();
    for (size_t k = 0; ok && k < in[0].shape.size(); ++k)
      ok = static_cast<int>(k) == axis || in[i].shape[k] == in[0].shape[k];
    MNEMO_CHECK(ok) << "concat: input " << i << " is " << in[i].str() << ", input 0 is " << in[0].str()
                    << ": dtype and every dimension but axis " << axis << " must match";
    y.shape[axis] += in[i].shape[axis];
  }
  return {y};
}

void concat_cpu(const KernelContext& c) {
  const int axis = normalize_axis(c.p<AxisParams>().axis, c.out[0].shape().size(), "concat");
  const Layout l = layout(c.out[0].shape(), axis);
  const int64_t row = l.inner * static_cast<int64_t>(dtype_size(c.out[0].dtype()));
  int64_t offset = 0;
  for (const TensorView& x : c.in) {
    const int64_t s = x.dim(axis);
    strided_copy(bytes_of(c.out[0]) + offset * row, l.extent * row, bytes_of(x), s * row, l.outer, s * row);
    offset += s;
  }
}

std::vector<std::optional<EntryRef>> grad_concat(Graph& g, const GradContext& c) {
  const int axis = normalize_axis(c.p<AxisParams>().axis, c.node.outputs[0].shape.size(), "concat");
  std::vector<int64_t> sizes;
  for (const EntryRef& e : c.inputs) sizes.push_back(g.type(e).shape[axis]);
  const int id = g.add("split", {*c.dout[0]}, {{"axis", int64_t{axis}}, {"sizes", sizes}});
  std::vector<std::optional<EntryRef>> dx;
  for (size_t i = 0; i < sizes.size(); ++i) dx.push_back(EntryRef{id, static_cast<int32_t>(i)});
  return dx;
}

Cost copy_cost(const void*, std::span<const TensorType> in, std::span<const TensorType> out) {
  return {0, io_bytes(in, out)};
}

TensorType f32(Shape s) { return {DType::f32, std::move(s)}; }

// ---- stack_rows ----

StackParams parse_stack(AttrReader& r) { return {r.require_int("begin"), 0}; }
StackParams parse_stack_grad(AttrReader& r) { return {r.require_int("begin"), r.require_int("rows")}; }

// The bytes of one row (axis 0) of a tensor of shape `s`.
int64_t row_bytes(const Shape& s, DType t) { return s.empty() ? 0 : numel(s) / s[0] * static_cast<int64_t>(dtype_size(t)); }

std::vector<TensorType> infer_stack(const void* params, std::span<const TensorType> in) {
  const TensorType &st = in[0], &x = in[1];
  const int64_t b = static_cast<const StackParams*>(params)->begin;
  MNEMO_CHECK(!st.shape.empty() && x.dtype == st.dtype && x.shape.size() == st.shape.size() &&
              std::equal(x.shape.begin() + 1, x.shape.end(), st.shape.begin() + 1))
      << "stack_rows: x must have stack's dtype and its dims after the first, got stack " << st.str() << " and x " << x.str();
  MNEMO_CHECK(b >= 0 && b + x.shape[0] <= st.shape[0]) << "stack_rows: rows [" << b << ", " << b + x.shape[0]
                                                       << ") are outside the stack's " << st.shape[0] << " rows";
  return {st};
}

// y may be the stack (in place): then only x's rows are written.
void stack_cpu(const KernelContext& c) {
  const int64_t row = row_bytes(c.in[0].shape(), c.in[0].dtype());
  if (c.out[0].data != c.in[0].data) std::memcpy(c.out[0].data, c.in[0].data, static_cast<size_t>(c.in[0].bytes()));
  const int64_t b = c.p<StackParams>().begin, n = c.in[1].dim(0);
  strided_copy(bytes_of(c.out[0]) + b * row, n * row, bytes_of(c.in[1]), n * row, 1, n * row);
}

std::vector<std::optional<EntryRef>> grad_stack(Graph& g, const GradContext& c) {
  const int64_t rows = g.type(c.inputs[1]).shape.at(0);
  const int v = g.add("stack_rows_grad", {*c.dout[0]}, {{"begin", c.p<StackParams>().begin}, {"rows", rows}});
  return {EntryRef{v, 0}, EntryRef{v, 1}};
}

std::vector<TensorType> infer_stack_grad(const void* params, std::span<const TensorType> in) {
  const StackParams& p = *static_cast<const StackParams*>(params);
  const TensorType& dy = in[0];
  MNEMO_CHECK(!dy.shape.empty() && p.rows >= 1 && p.begin >= 0 && p.begin + p.rows <= dy.shape[0])
      << "stack_rows_grad: rows [" << p.begin << ", " << p.begin + p.rows << ") are outside dy " << dy.str();
  TensorType dx = dy;
  dx.shape[0] = p.rows;
  return {dy, dx};
}

// dstack may be dy (in place): dx is copied out before its rows are zeroed.
void stack_grad_cpu(const KernelContext& c) {
  const StackParams& p = c.p<StackParams>();
  const int64_t row = row_bytes(c.in[0].shape(), c.in[0].dtype());
  strided_copy(bytes_of(c.out[1]), p.rows * row, bytes_of(c.in[0]) + p.begin * row, p.rows * row, 1, p.rows * row);
  if (c.out[0].data != c.in[0].data) std::memcpy(c.out[0].data, c.in[0].data, static_cast<size_t>(c.in[0].bytes()));
  strided_copy(bytes_of(c.out[0]) + p.begin * row, p.rows * row, nullptr, 0, 1, p.rows * row);
}

// What copying rows of `t` moves (read and written; in place, the rest of the stack is untouched).
Cost rows_cost(const TensorType& t) { return Cost{0, 2.0 * static_cast<double>(t.bytes())}; }

}  // namespace
}  // namespace mnemo::ops

MNEMO_REGISTER_OPS(slice_concat) {
  using namespace mnemo;
  using namespace mnemo::ops;
  {
    OpDef d;
    d.name = "slice";
    d.doc = "y = x[..., begin:end, ...] along axis (end exclusive)";
    d.min_inputs = d.max_inputs = 1;
    d.parse = parse_with(parse_slice, "slice");
    d.infer = infer_slice;
    d.grad = grad_slice;
    d.cost = copy_cost;
    d.cpu = slice_cpu;
    d.sample = OpSample{{{"axis", int64_t{1}}, {"begin", int64_t{1}}, {"end", int64_t{4}}}, {f32({2, 5, 4})}};
    registry.add(std::move(d));
  }
  {
    OpDef d;
    d.name = "slice_grad";
    d.doc = "backward of slice: dx = zeros(input_shape) with dy written at begin along axis";
    d.min_inputs = d.max_inputs = 1;
    d.parse = parse_with(parse_slice_grad, "slice_grad");
    d.infer = infer_slice_grad;
    d.cost = copy_cost;
    d.cpu = slice_grad_cpu;
    d.sample = OpSample{{{"axis", int64_t{1}}, {"begin", int64_t{1}}, {"input_shape", std::vector<int64_t>{2, 5, 4}}},
                        {f32({2, 3, 4})}};
    registry.add(std::move(d));
  }
  {
    OpDef d;
    d.name = "split";
    d.doc = "y1..yk = consecutive pieces of x along axis (sizes or equal parts)";
    d.min_inputs = d.max_inputs = 1;
    d.parse = parse_with(parse_split, "split");
    d.infer = infer_split;
    d.grad = grad_split;
    d.cost = copy_cost;
    d.cpu = split_cpu;
    d.sample = OpSample{{{"axis", int64_t{1}}, {"sizes", std::vector<int64_t>{1, 2, 3}}}, {f32({2, 6, 3})}};
    registry.add(std::move(d));
  }
  {
    OpDef d;
    d.name = "concat";
    d.doc = "y = x1..xk joined along axis";
    d.min_inputs = 1;
    d.max_inputs = -1;
    d.parse = parse_with(parse_axis, "concat");
    d.infer = infer_concat;
    d.grad = grad_concat;
    d.cost = copy_cost;
    d.cpu = concat_cpu;
    d.sample = OpSample{{{"axis", int64_t{1}}}, {f32({2, 1, 3}), f32({2, 2, 3}), f32({2, 3, 3})}};
    registry.add(std::move(d));
  }
  {
    OpDef d;
    d.name = "stack_rows";
    d.doc = "y = stack with x written at row begin (axis 0), in place on stack";
    d.min_inputs = d.max_inputs = 2;
    d.parse = parse_with(parse_stack, "stack_rows");
    d.infer = infer_stack;
    d.grad = grad_stack;
    d.inplace = {{0, 0}};
    d.cost = [](const void*, std::span<const TensorType> in, std::span<const TensorType>) { return rows_cost(in[1]); };
    d.cpu = stack_cpu;
    d.sample = OpSample{{{"begin", int64_t{1}}}, {f32({5, 3}), f32({2, 3})}};
    registry.add(std::move(d));
  }
  {
    OpDef d;
    d.name = "stack_rows_grad";
    d.doc = "backward of stack_rows: dx = dy's rows [begin, begin+rows), dstack = dy with them zero (in place)";
    d.min_inputs = d.max_inputs = 1;
    d.parse = parse_with(parse_stack_grad, "stack_rows_grad");
    d.infer = infer_stack_grad;
    d.inplace = {{0, 0}};
    d.cost = [](const void*, std::span<const TensorType>, std::span<const TensorType> out) { return rows_cost(out[1]); };
    d.cpu = stack_grad_cpu;
    d.sample = OpSample{{{"begin", int64_t{1}}, {"rows", int64_t{2}}}, {f32({5, 3})}};
    registry.add(std::move(d));
  }
}
