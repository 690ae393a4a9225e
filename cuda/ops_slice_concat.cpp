// CUDA kernels of ops/slice_concat.cpp: slice, slice_grad, split, concat (any 4- or 8-byte dtype;
// strided element copies, see cuda/kernels/slice_concat_math.h). A tensor is seen as
// [outer, extent, inner] around the axis, as in the CPU op.
#include "cuda/context.h"
#include "cuda/kernels/slice_concat.h"
#include "ops/slice_concat.h"

namespace mnemo::cuda {
namespace {

using ops::normalize_axis;
using Layout = ops::AxisLayout;
Layout layout(const Shape& s, int axis) { return ops::axis_layout(s, axis); }

int elem_size(const TensorView& t) { return static_cast<int>(dtype_size(t.dtype())); }
// Element `i` of t's buffer, as a byte pointer.
char* at(const TensorView& t, int64_t i) { return static_cast<char*>(t.data) + i * elem_size(t); }

void slice_k(const KernelContext& c) {  // in: x  out: y = x[..., begin:end, ...]
  const auto& p = c.p<ops::SliceParams>();
  const TensorView& x = c.in[0];
  const TensorView& y = c.out[0];
  const int axis = normalize_axis(p.axis, x.shape().size(), "slice");
  const Layout l = layout(x.shape(), axis);
  const int64_t begin = p.begin < 0 ? p.begin + l.extent : p.begin;
  const int64_t len = y.dim(axis);  // end - begin (checked by inference)
  strided_copy(context_of(c).stream, y.data, len * l.inner, at(x, begin * l.inner), l.extent * l.inner, l.outer,
               len * l.inner, elem_size(x));
}

void slice_grad_k(const KernelContext& c) {  // in: dy  out: dx of input_shape
  const auto& p = c.p<ops::SliceGradParams>();
  const TensorView& dy = c.in[0];
  const TensorView& dx = c.out[0];
  const int axis = normalize_axis(p.axis, p.input_shape.size(), "slice_grad");
  const Layout l = layout(p.input_shape, axis);
  slice_grad(context_of(c).stream, dx.data, dy.data, l.outer, l.extent, l.inner, p.begin, dy.dim(axis),
             elem_size(dx));
}

void split_k(const KernelContext& c) {  // in: x  out: y1..yk, consecutive pieces along axis
  const TensorView& x = c.in[0];
  const int axis = normalize_axis(c.p<ops::SplitParams>().axis, x.shape().size(), "split");
  const Layout l = layout(x.shape(), axis);
  int64_t offset = 0;
  for (const TensorView& y : c.out) {
    const int64_t s = y.dim(axis);
    strided_copy(context_of(c).stream, y.data, s * l.inner, at(x, offset * l.inner), l.extent * l.inner, l.outer,
                 s * l.inner, elem_size(x));
    offset += s;
  }
}

void concat_k(const KernelContext& c) {  // in: x1..xk  out: y, the xi joined along axis
  const TensorView& y = c.out[0];
  const int axis = normalize_axis(c.p<ops::AxisParams>().axis, y.shape().size(), "concat");
  const Layout l = layout(y.shape(), axis);
  int64_t offset = 0;
  for (const TensorView& x : c.in) {
    const int64_t s = x.dim(axis);
    strided_copy(context_of(c).stream, at(y, offset * l.inner), l.extent * l.inner, x.data, s * l.inner, l.outer,
                 s * l.inner, elem_size(y));
    offset += s;
  }
}

}  // namespace
}  // namespace mnemo::cuda

MNEMO_REGISTER_CUDA_OPS(slice_concat) {
  using namespace mnemo::cuda;
  table.add("slice", {slice_k});
  table.add("slice_grad", {slice_grad_k});
  table.add("split", {split_k});
  table.add("concat", {concat_k});
}
