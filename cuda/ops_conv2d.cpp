// CUDA kernels of the conv2d ops (ops/conv2d.cpp, ops/conv2d_grad.cpp) through cuDNN's legacy API,
// NCHW float32, cross-correlation, grouped (cudnnSetConvolutionGroupCount) where attr groups > 1:
//   conv2d(x, w [, b])          cudnnConvolutionForward (+ cudnnAddTensor for the bias)
//   conv2d_grad_data(dy, w)     cudnnConvolutionBackwardData
//   conv2d_grad_weight(dy, x)   cudnnConvolutionBackwardFilter
//   conv2d_grad_bias(dy)        own kernel (cuda/kernels/conv2d.cu): per-channel double sum in a
//                               fixed order, like the CPU op (which sums in double); each channel
//                               split over several blocks, partials in the planned workspace
// Math: the convolution descriptor is CUDNN_FMA_MATH (float32 FMA kernels only). CUDNN_DEFAULT_MATH
// would not do: on Ampere and later it permits TF32 tensor-core kernels for float data.
// Algorithms: cuDNN's heuristics (cudnnGetConvolution*Algorithm_v7, nothing is run), taking the
// first result with status success, CUDNN_DETERMINISTIC, no tensor-op math type and a workspace
// size cuDNN reports for this geometry; backward-data ALGO_0 and backward-filter ALGO_0 / ALGO_3
// (atomics) are excluded by name as well. Fallbacks if none qualifies: forward IMPLICIT_GEMM,
// backward data ALGO_1, backward filter ALGO_1 (all deterministic). Algorithms whose workspace
// exceeds max(64 MiB, the op's largest tensor) are passed over while another qualifies (the
// workspace is planned memory). The choice, the descriptors and the workspace size are cached
// per (pass, bias, shapes, stride, padding, dilation, groups, launch limit) in Context::cached(),
// so the planner's workspace query and the kernel use the same algorithm.
// The conv `algo` attribute (auto / im2col / winograd: CPU implementations) is ignored here.
// Batches past the descriptors' int range: x or y above Context::conv_launch_elements (INT_MAX)
// elements is cut along the batch into equal launches (the last smaller when they do not divide
// it), each with its own descriptors and algorithm; the weight gradient adds the launches' sums in
// batch order (beta = 1), so the result is deterministic. One sample past the range is an error.
#include <algorithm>
#include <climits>
#include <cstdint>
#include <memory>
#include <string>

#include "cuda/check.h"
#include "cuda/context.h"
#include "cuda/kernels/conv2d.h"
#include "cuda/kernels/conv2d_math.h"
#include "ops/conv2d.h"

namespace mnemo::cuda {
namespace {

using ops::conv::Params;

enum class Pass : int { forward = 0, backward_data = 1, backward_filter = 2 };
const char* pass_op(Pass p) {
  return p == Pass::forward ? "conv2d" : p == Pass::backward_data ? "conv2d_grad_data" : "conv2d_grad_weight";
}

// Descriptors and the chosen algorithm of one pass for one geometry (host objects, immutable once built).
struct ConvLaunch {
  cudnnTensorDescriptor_t x = nullptr, y = nullptr, bias = nullptr;  // bias: [1,K,1,1], forward only
  cudnnFilterDescriptor_t w = nullptr;
  cudnnConvolutionDescriptor_t conv = nullptr;
  int algo = -1;  // a cudnnConvolutionFwdAlgo_t, ...BwdDataAlgo_t or ...BwdFilterAlgo_t, by pass
  size_t workspace = 0;

  ConvLaunch() = default;
  ConvLaunch(const ConvLaunch&) = delete;
  ConvLaunch& operator=(const ConvLaunch&) = delete;
  ~ConvLaunch() {
    if (conv) cudnnDestroyConvolutionDescriptor(conv);
    if (w) cudnnDestroyFilterDescriptor(w);
    if (bias) cudnnDestroyTensorDescriptor(bias);
    if (y) cudnnDestroyTensorDescriptor(y);
    if (x) cudnnDestroyTensorDescriptor(x);
  }
};

// One pass over a batch of `batch` samples, launched as cuDNN calls of `chunk` samples each (the
// last of `tail`'s size when `chunk` does not divide `batch`): cuDNN's legacy descriptors index with
// int, so a batch whose x or y holds more than Context::conv_launch_elements elements (INT_MAX) is
// split along the batch; the weight gradient accumulates the chunks' sums in batch order.
struct ConvPlan {
  std::unique_ptr<ConvLaunch> main;
  std::unique_ptr<ConvLaunch> tail;  // the last launch's, when its batch is smaller (else null)
  int64_t batch = 0, chunk = 0;
  int64_t x_sample = 0, y_sample = 0;  // elements of one sample of x and of y
  size_t workspace = 0;                // the larger launch's
};
using PlanPtr = std::shared_ptr<const ConvPlan>;

int to_int(int64_t v, Pass pass, const char* what) {
  MNEMO_CHECK(v >= 0 && v <= INT_MAX) << pass_op(pass) << " (cuDNN): " << what << " = " << v
                                      << " exceeds cuDNN's int range";
  return static_cast<int>(v);
}

void require_4d_f32(const TensorType& t, Pass pass, const char* what) {
  MNEMO_CHECK(t.dtype == DType::f32 && t.shape.size() == 4)
      << pass_op(pass) << " (CUDA): " << what << " must be a float32 rank-4 tensor, got " << t.str();
}

cudnnTensorDescriptor_t tensor_desc(const Shape& s, Pass pass, const char* what) {
  cudnnTensorDescriptor_t d = nullptr;
  MNEMO_CUDNN_CHECK(cudnnCreateTensorDescriptor(&d));
  const cudnnStatus_t st = cudnnSetTensor4dDescriptor(d, CUDNN_TENSOR_NCHW, CUDNN_DATA_FLOAT, to_int(s[0], pass, what),
                                                      to_int(s[1], pass, what), to_int(s[2], pass, what),
                                                      to_int(s[3], pass, what));
  if (st != CUDNN_STATUS_SUCCESS) {
    cudnnDestroyTensorDescriptor(d);
    MNEMO_FAIL() << pass_op(pass) << ": cudnnSetTensor4dDescriptor(" << what << ") failed: " << cudnnGetErrorString(st);
  }
  return d;
}

bool tensor_op_math(cudnnMathType_t m) {
  return m == CUDNN_TENSOR_OP_MATH || m == CUDNN_TENSOR_OP_MATH_ALLOW_CONVERSION;
}

// Picks the algorithm of `plan` (descriptors set) for `pass` and its workspace size. Workspace is
// memory the plan must hold: algorithms needing more than `cap` (the larger of 64 MiB and the
// largest tensor of the op; FFT algorithms can ask for several times that) are taken only when no
// other deterministic algorithm is offered.
void choose_algorithm(Context& ctx, Pass pass, ConvLaunch& plan, size_t cap) {
  auto accept = [&](int algo, cudnnStatus_t status, cudnnDeterminism_t det, cudnnMathType_t math) {
    if (status != CUDNN_STATUS_SUCCESS || det != CUDNN_DETERMINISTIC || tensor_op_math(math)) return false;
    size_t bytes = 0;
    cudnnStatus_t st = CUDNN_STATUS_NOT_SUPPORTED;
    if (pass == Pass::forward) {
      st = cudnnGetConvolutionForwardWorkspaceSize(ctx.cudnn, plan.x, plan.w, plan.conv, plan.y,
                                                   static_cast<cudnnConvolutionFwdAlgo_t>(algo), &bytes);
    } else if (pass == Pass::backward_data) {
      if (algo == CUDNN_CONVOLUTION_BWD_DATA_ALGO_0) return false;  // atomics
      st = cudnnGetConvolutionBackwardDataWorkspaceSize(ctx.cudnn, plan.w, plan.y, plan.conv, plan.x,
                                                        static_cast<cudnnConvolutionBwdDataAlgo_t>(algo), &bytes);
    } else {
      if (algo == CUDNN_CONVOLUTION_BWD_FILTER_ALGO_0 || algo == CUDNN_CONVOLUTION_BWD_FILTER_ALGO_3) return false;
      st = cudnnGetConvolutionBackwardFilterWorkspaceSize(ctx.cudnn, plan.x, plan.y, plan.conv, plan.w,
                                                          static_cast<cudnnConvolutionBwdFilterAlgo_t>(algo), &bytes);
    }
    if (st != CUDNN_STATUS_SUCCESS || bytes > cap) return false;
    plan.algo = algo;
    plan.workspace = bytes;
    return true;
  };
  int returned = 0;
  if (pass == Pass::forward) {
    cudnnConvolutionFwdAlgoPerf_t perf[CUDNN_CONVOLUTION_FWD_ALGO_COUNT];
    MNEMO_CUDNN_CHECK(cudnnGetConvolutionForwardAlgorithm_v7(ctx.cudnn, plan.x, plan.w, plan.conv, plan.y,
                                                             CUDNN_CONVOLUTION_FWD_ALGO_COUNT, &returned, perf));
    for (int i = 0; i < returned; ++i)
      if (accept(perf[i].algo, perf[i].status, perf[i].determinism, perf[i].mathType)) return;
    if (accept(CUDNN_CONVOLUTION_FWD_ALGO_IMPLICIT_GEMM, CUDNN_STATUS_SUCCESS, CUDNN_DETERMINISTIC, CUDNN_FMA_MATH))
      return;
  } else if (pass == Pass::backward_data) {
    cudnnConvolutionBwdDataAlgoPerf_t perf[CUDNN_CONVOLUTION_BWD_DATA_ALGO_COUNT];
    MNEMO_CUDNN_CHECK(cudnnGetConvolutionBackwardDataAlgorithm_v7(ctx.cudnn, plan.w, plan.y, plan.conv, plan.x,
                                                                  CUDNN_CONVOLUTION_BWD_DATA_ALGO_COUNT, &returned,
                                                                  perf));
    for (int i = 0; i < returned; ++i)
      if (accept(perf[i].algo, perf[i].status, perf[i].determinism, perf[i].mathType)) return;
    if (accept(CUDNN_CONVOLUTION_BWD_DATA_ALGO_1, CUDNN_STATUS_SUCCESS, CUDNN_DETERMINISTIC, CUDNN_FMA_MATH)) return;
  } else {
    cudnnConvolutionBwdFilterAlgoPerf_t perf[CUDNN_CONVOLUTION_BWD_FILTER_ALGO_COUNT];
    MNEMO_CUDNN_CHECK(cudnnGetConvolutionBackwardFilterAlgorithm_v7(ctx.cudnn, plan.x, plan.y, plan.conv, plan.w,
                                                                    CUDNN_CONVOLUTION_BWD_FILTER_ALGO_COUNT, &returned,
                                                                    perf));
    for (int i = 0; i < returned; ++i)
      if (accept(perf[i].algo, perf[i].status, perf[i].determinism, perf[i].mathType)) return;
    if (accept(CUDNN_CONVOLUTION_BWD_FILTER_ALGO_1, CUDNN_STATUS_SUCCESS, CUDNN_DETERMINISTIC, CUDNN_FMA_MATH)) return;
  }
  if (cap != SIZE_MAX) return choose_algorithm(ctx, pass, plan, SIZE_MAX);
  MNEMO_FAIL() << pass_op(pass) << ": cuDNN offers no deterministic float32 (FMA) algorithm for this geometry ("
               << returned << " heuristic results)";
}

std::unique_ptr<ConvLaunch> make_launch(Context& ctx, Pass pass, const TensorType& x, const TensorType& w,
                                        const TensorType& y, const Params& p, bool bias) {
  auto plan = std::make_unique<ConvLaunch>();
  plan->x = tensor_desc(x.shape, pass, "x");
  plan->y = tensor_desc(y.shape, pass, "y");
  if (bias) plan->bias = tensor_desc(Shape{1, w.shape[0], 1, 1}, pass, "bias");
  MNEMO_CUDNN_CHECK(cudnnCreateFilterDescriptor(&plan->w));
  MNEMO_CUDNN_CHECK(cudnnSetFilter4dDescriptor(plan->w, CUDNN_DATA_FLOAT, CUDNN_TENSOR_NCHW, to_int(w.shape[0], pass, "K"),
                                               to_int(w.shape[1], pass, "C"), to_int(w.shape[2], pass, "R"),
                                               to_int(w.shape[3], pass, "S")));
  MNEMO_CUDNN_CHECK(cudnnCreateConvolutionDescriptor(&plan->conv));
  MNEMO_CUDNN_CHECK(cudnnSetConvolution2dDescriptor(plan->conv, to_int(p.ph, pass, "padding"),
                                                    to_int(p.pw, pass, "padding"), to_int(p.sh, pass, "stride"),
                                                    to_int(p.sw, pass, "stride"), to_int(p.dh, pass, "dilation"),
                                                    to_int(p.dw, pass, "dilation"), CUDNN_CROSS_CORRELATION,
                                                    CUDNN_DATA_FLOAT));
  // Grouped: the filter is [K, C/G, R, S], as mnemo's w.
  if (p.groups != 1) MNEMO_CUDNN_CHECK(cudnnSetConvolutionGroupCount(plan->conv, to_int(p.groups, pass, "groups")));
  MNEMO_CUDNN_CHECK(cudnnSetConvolutionMathType(plan->conv, CUDNN_FMA_MATH));
  int n = 0, k = 0, oh = 0, ow = 0;
  MNEMO_CUDNN_CHECK(cudnnGetConvolution2dForwardOutputDim(plan->conv, plan->x, plan->w, &n, &k, &oh, &ow));
  MNEMO_CHECK(Shape({n, k, oh, ow}) == y.shape)
      << pass_op(pass) << ": cuDNN computes output [" << n << "," << k << "," << oh << "," << ow << "] for x "
      << x.str() << " and w " << w.str() << ", the graph has " << y.str();
  const size_t largest = std::max({x.bytes(), w.bytes(), y.bytes()});
  choose_algorithm(ctx, pass, *plan, std::max<size_t>(size_t{64} << 20, largest));
  return plan;
}

PlanPtr make_plan(Context& ctx, Pass pass, const TensorType& x, const TensorType& w, const TensorType& y,
                  const Params& p, bool bias, int64_t limit) {
  MNEMO_CHECK(!p.block) << pass_op(pass) << ": block " << p.block
                        << " (channel-blocked activations, oneDNN's layout) runs on the CPU only; on a GPU build the "
                        << "model with model.layout: plain";
  require_4d_f32(x, pass, pass == Pass::backward_data ? "dx" : "x");
  require_4d_f32(w, pass, pass == Pass::backward_filter ? "dw" : "w");
  require_4d_f32(y, pass, pass == Pass::forward ? "y" : "dy");
  MNEMO_CHECK(x.shape[0] == y.shape[0]) << pass_op(pass) << ": x " << x.str() << " and y " << y.str()
                                        << " differ in batch";
  // The planner may ask from its own threads: make the device current there (cuDNN's heuristics
  // read the current device's properties).
  MNEMO_CUDA_CHECK(cudaSetDevice(ctx.ordinal));
  auto plan = std::make_shared<ConvPlan>();
  plan->batch = x.shape[0];
  plan->x_sample = x.shape[1] * x.shape[2] * x.shape[3];
  plan->y_sample = y.shape[1] * y.shape[2] * y.shape[3];
  plan->chunk = conv::launch_batch(plan->batch, std::max(plan->x_sample, plan->y_sample), limit);
  MNEMO_CHECK(plan->chunk >= 1) << pass_op(pass) << " (cuDNN): one sample of x " << x.str() << " or y " << y.str()
                                << " has more than " << limit
                                << " elements (cuDNN's legacy descriptors index with int; a batch is split into launches, a "
                                   "sample cannot be)";
  auto with_batch = [](const TensorType& t, int64_t n) {
    TensorType r = t;
    r.shape[0] = n;
    return r;
  };
  plan->main = make_launch(ctx, pass, with_batch(x, plan->chunk), w, with_batch(y, plan->chunk), p, bias);
  plan->workspace = plan->main->workspace;
  const int64_t rest = plan->batch % plan->chunk;
  if (rest) {
    plan->tail = make_launch(ctx, pass, with_batch(x, rest), w, with_batch(y, rest), p, bias);
    plan->workspace = std::max(plan->workspace, plan->tail->workspace);
  }
  return plan;
}

// The cached plan of `pass` for x, w, y (forward orientation: y = conv(x, w) whatever the pass).
const PlanPtr& plan_of(Context& ctx, Pass pass, const TensorType& x, const TensorType& w, const TensorType& y,
                        const Params& p, bool bias) {
  std::string key = "conv2d/";  // built by appending (GCC 12 warns falsely on "literal" + string&&)
  key += std::to_string(static_cast<int>(pass));
  if (bias) key += 'b';
  for (const Shape* s : {&x.shape, &w.shape, &y.shape}) {
    key += '/';
    for (int64_t d : *s) {
      key += std::to_string(d);
      key += ',';
    }
  }
  const int64_t limit = ctx.conv_launch_elements;  // read once: the key and the plan agree
  for (int64_t v : {p.sh, p.sw, p.ph, p.pw, p.dh, p.dw, p.groups, limit}) {
    key += '/';
    key += std::to_string(v);
  }
  return ctx.cached<PlanPtr>(key, [&] { return make_plan(ctx, pass, x, w, y, p, bias, limit); });
}

// The tensors of each op in forward orientation: (x, w, y).
struct Roles {
  const TensorType *x, *w, *y;
};
Roles roles(Pass pass, std::span<const TensorType> in, std::span<const TensorType> out) {
  if (pass == Pass::forward) return {&in[0], &in[1], &out[0]};          // (x, w [, b]) -> y
  if (pass == Pass::backward_data) return {&out[0], &in[1], &in[0]};    // (dy, w) -> dx
  return {&in[1], &out[0], &in[0]};                                     // (dy, x) -> dw
}

// Prepared once per node when the plan is made: the plan (algorithm and descriptors) is the node's
// state, its workspace the planned one.
template <Pass kPass>
Prepared conv_prepare(Context& ctx, const void* params, std::span<const TensorType> in, std::span<const TensorType> out) {
  const Roles r = roles(kPass, in, out);
  const bool bias = kPass == Pass::forward && in.size() > 2;
  const PlanPtr& plan = plan_of(ctx, kPass, *r.x, *r.w, *r.y, *static_cast<const Params*>(params), bias);
  return {plan, plan->workspace};
}

const ConvPlan& plan_for_kernel(const KernelContext& c, Pass pass) {
  MNEMO_ASSERT(c.state) << pass_op(pass) << ": the node was not prepared";
  const ConvPlan& plan = *static_cast<const ConvPlan*>(c.state);
  MNEMO_ASSERT(c.workspace_bytes >= plan.workspace && (plan.workspace == 0 || c.workspace))
      << pass_op(pass) << " (cuDNN algorithm " << plan.main->algo << "): workspace of " << c.workspace_bytes
      << " bytes planned, needs " << plan.workspace;
  return plan;
}

// Calls f(launch, first sample, first launch?) for each launch of the plan, in batch order.
template <class F>
void for_each_launch(const ConvPlan& plan, F&& f) {
  for (int64_t b = 0; b < plan.batch; b += plan.chunk) {
    const ConvLaunch& l = plan.batch - b < plan.chunk ? *plan.tail : *plan.main;
    f(l, b, b == 0);
  }
}

float* at_sample(void* data, int64_t sample, int64_t per) { return static_cast<float*>(data) + sample * per; }
const float* at_sample(const void* data, int64_t sample, int64_t per) {
  return static_cast<const float*>(data) + sample * per;
}

void conv2d_forward(const KernelContext& c) {  // (x, w [, b]) -> y
  const bool bias = c.in.size() > 2;
  const ConvPlan& plan = plan_for_kernel(c, Pass::forward);
  cudnnHandle_t h = context_of(c).cudnn;
  const float one = 1.0f, zero = 0.0f;
  for_each_launch(plan, [&](const ConvLaunch& l, int64_t b, bool) {
    float* y = at_sample(c.out[0].data, b, plan.y_sample);
    MNEMO_CUDNN_CHECK(cudnnConvolutionForward(h, &one, l.x, at_sample(c.in[0].data, b, plan.x_sample), l.w, c.in[1].data,
                                              l.conv, static_cast<cudnnConvolutionFwdAlgo_t>(l.algo), c.workspace,
                                              l.workspace, &zero, l.y, y));
    if (bias) MNEMO_CUDNN_CHECK(cudnnAddTensor(h, &one, l.bias, c.in[2].data, &one, l.y, y));
  });
}

void conv2d_grad_data(const KernelContext& c) {  // (dy, w) -> dx
  const ConvPlan& plan = plan_for_kernel(c, Pass::backward_data);
  const float one = 1.0f, zero = 0.0f;
  for_each_launch(plan, [&](const ConvLaunch& l, int64_t b, bool) {
    MNEMO_CUDNN_CHECK(cudnnConvolutionBackwardData(context_of(c).cudnn, &one, l.w, c.in[1].data, l.y,
                                                   at_sample(c.in[0].data, b, plan.y_sample), l.conv,
                                                   static_cast<cudnnConvolutionBwdDataAlgo_t>(l.algo), c.workspace,
                                                   l.workspace, &zero, l.x, at_sample(c.out[0].data, b, plan.x_sample)));
  });
}

// Split along the batch, the later launches add their sums to the earlier ones' (beta = 1).
void conv2d_grad_weight(const KernelContext& c) {  // (dy, x) -> dw
  const ConvPlan& plan = plan_for_kernel(c, Pass::backward_filter);
  const float one = 1.0f, zero = 0.0f;
  for_each_launch(plan, [&](const ConvLaunch& l, int64_t b, bool first) {
    MNEMO_CUDNN_CHECK(cudnnConvolutionBackwardFilter(context_of(c).cudnn, &one, l.x, at_sample(c.in[1].data, b, plan.x_sample),
                                                     l.y, at_sample(c.in[0].data, b, plan.y_sample), l.conv,
                                                     static_cast<cudnnConvolutionBwdFilterAlgo_t>(l.algo), c.workspace,
                                                     l.workspace, first ? &zero : &one, l.w, c.out[0].data));
  });
}

// The block partials of the bias reduction (dy[N,K,P,Q] = in[0]).
size_t grad_bias_workspace(Context&, const void*, std::span<const TensorType> in, std::span<const TensorType>) {
  const Shape& s = in[0].shape;
  return conv2d_bias_grad_workspace_bytes(s.at(0), s.at(1), s.at(2) * s.at(3));
}

void conv2d_grad_bias(const KernelContext& c) {  // dy[N,K,P,Q] -> db[K]
  const TensorView& dy = c.in[0];
  const int64_t N = dy.dim(0), K = dy.dim(1), L = dy.dim(2) * dy.dim(3);
  const size_t need = conv2d_bias_grad_workspace_bytes(N, K, L);
  MNEMO_CHECK(c.workspace_bytes >= need && (need == 0 || c.workspace))
      << "conv2d_grad_bias: workspace of " << c.workspace_bytes << " bytes planned, needs " << need;
  conv2d_bias_grad(context_of(c).stream, dy.as<float>(), c.out[0].as<float>(), N, K, L, c.workspace);
}

}  // namespace

int64_t conv_launches(const void* state) {
  const ConvPlan& plan = *static_cast<const ConvPlan*>(state);
  return (plan.batch + plan.chunk - 1) / plan.chunk;
}

}  // namespace mnemo::cuda

MNEMO_REGISTER_CUDA_OPS(conv2d) {
  using namespace mnemo::cuda;
  table.add("conv2d", {conv2d_forward, nullptr, conv_prepare<Pass::forward>});
  table.add("conv2d_grad_data", {conv2d_grad_data, nullptr, conv_prepare<Pass::backward_data>});
  table.add("conv2d_grad_weight", {conv2d_grad_weight, nullptr, conv_prepare<Pass::backward_filter>});
  table.add("conv2d_grad_bias", {conv2d_grad_bias, grad_bias_workspace});
}
