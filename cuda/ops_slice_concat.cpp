// CUDA kernels of ops/slice_concat.cpp: slice, slice_grad, split, concat (any 4- or 8-byte dtype;
// strided element copies, see cuda/kernels/slice_concat_math.h). A tensor is seen as
// [outer, extent, inner] around the axis, as in the CPU op. stack_rows and stack_rows_grad (the
// fused LSTM head's) move whole rows of axis 0, contiguous bytes: the stream's copies and memsets.
#include "cuda/check.h"
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

// The bytes of one row (axis 0) of t.
int64_t bytes_of(const TensorView& t) { return static_cast<int64_t>(t.bytes()); }
int64_t row_bytes(const TensorView& t) { return t.dim(0) ? bytes_of(t) / t.dim(0) : 0; }

void copy_bytes(const KernelContext& c, void* dst, const void* src, int64_t bytes) {
  if (bytes > 0 && dst != src)
    MNEMO_CUDA_CHECK(cudaMemcpyAsync(dst, src, static_cast<size_t>(bytes), cudaMemcpyDeviceToDevice, context_of(c).stream));
}

void stack_rows_k(const KernelContext& c) {  // in: stack, x  out: y = stack with x at row begin (y may be stack)
  const TensorView &st = c.in[0], &x = c.in[1], &y = c.out[0];
  const int64_t row = row_bytes(st), begin = c.p<ops::StackParams>().begin;
  copy_bytes(c, y.data, st.data, bytes_of(st));
  copy_bytes(c, static_cast<char*>(y.data) + begin * row, x.data, x.dim(0) * row);
}

void stack_rows_grad_k(const KernelContext& c) {  // in: dy  out: dstack (may be dy), dx = dy's rows [begin, begin + rows)
  const auto& p = c.p<ops::StackParams>();
  const TensorView &dy = c.in[0], &dstack = c.out[0], &dx = c.out[1];
  const int64_t row = row_bytes(dy);
  copy_bytes(c, dx.data, static_cast<const char*>(dy.data) + p.begin * row, p.rows * row);  // before the rows are zeroed
  copy_bytes(c, dstack.data, dy.data, bytes_of(dy));
  if (p.rows * row > 0)
    MNEMO_CUDA_CHECK(cudaMemsetAsync(static_cast<char*>(dstack.data) + p.begin * row, 0, static_cast<size_t>(p.rows * row),
                                     context_of(c).stream));
}

}  // namespace
}  // namespace mnemo::cuda

MNEMO_REGISTER_CUDA_OPS(slice_concat) {
  using namespace mnemo::cuda;
  table.add("slice", {slice_k});
  table.add("slice_grad", {slice_grad_k});
  table.add("split", {split_k});
  table.add("concat", {concat_k});
  table.add("stack_rows", {stack_rows_k});
  table.add("stack_rows_grad", {stack_rows_grad_k});
}
