// Shared by ops/conv2d.cpp (forward) and ops/conv2d_grad.cpp (the three backward ops): the conv
// params, the geometry check, the im2col/col2im loops, and the oneDNN float32 driver.
// Shape letters: x[N,C,H,W], w[K,C/G,R,S], y[N,K,P,Q], P = (H + 2ph - dh*(R-1) - 1)/sh + 1 (Q alike);
// G groups (attr `groups`, default 1): output channels [k*K/G, (k+1)*K/G) read input channels
// [k*C/G, (k+1)*C/G) only (G = C = K: depthwise).
#pragma once
#include <algorithm>
#include <array>
#include <cstring>
#include <memory>
#include <optional>

#include "ops/common.h"

namespace mnemo::ops::conv {

// The largest dimension, stride, padding or dilation a convolution accepts.
constexpr int64_t kMaxConvDim = int64_t{1} << 24;

// "auto": oneDNN direct convolution for float32 (measured 1.5-2.5x faster here than im2col, see
// docs/BENCHMARKS.md), im2col + Eigen GEMM for float64. "im2col": im2col + Eigen GEMM for both.
// "winograd": oneDNN Winograd F(4x4,3x3) for float32 where oneDNN has it (3x3, stride 1, no
// dilation; else direct): 1.3-2x faster at 32-64 channels, but 2-7x larger rounding error and
// 9-32 MiB of workspace per pass on CIFAR shapes, so opt-in.
enum class Algo : uint8_t { automatic, im2col, winograd };

struct Params {
  int64_t sh = 1, sw = 1, ph = 0, pw = 0, dh = 1, dw = 1;
  int64_t groups = 1;
  int64_t in_h = -1, in_w = -1;  // conv2d_grad_data: input_hw
  int64_t kr = -1, ks = -1;      // conv2d_grad_weight: kernel
  Algo algo = Algo::automatic;
  // 0: x, y (and dy, dx) are plain [N,C,H,W]; 8 or 16: channel-blocked [N,C/b,H,W,b] (ops/layout.cpp),
  // oneDNN's own layout for its float32 kernels: no reorders around the primitive. Weights stay
  // plain [K,C/G,R,S]. float32 on oneDNN only, groups 1, no bias.
  int64_t block = 0;
};

// Reads stride, padding, dilation, groups and algo (the attributes every conv op has).
Params parse_common(AttrReader& r);
// The attributes of the backward nodes built from forward params p (input_hw / kernel added by the caller).
Attrs common_attrs(const Params& p);

// C and K count all channels; each group's GEMM is [K/G, CRS()] x [CRS(), PQ()].
struct Geom {
  int64_t N, C, H, W, K, R, S, P, Q;
  int64_t sh, sw, ph, pw, dh, dw;
  int64_t G = 1;
  int64_t Cg() const { return C / G; }
  int64_t Kg() const { return K / G; }
  int64_t CRS() const { return Cg() * R * S; }  // one group's im2col rows
  int64_t PQ() const { return P * Q; }
  double flops() const { return 2.0 * N * K * Cg() * R * S * P * Q; }
  // One group as its own convolution (C/G input and K/G output channels, G = 1): what the im2col
  // loops run per group, on x + g*(C/G)*H*W, w + g*(K/G)*CRS() and y + g*(K/G)*PQ().
  Geom group() const {
    Geom g = *this;
    g.C = Cg(), g.K = Kg(), g.G = 1;
    return g;
  }
};

// Computes P, Q and checks them (>= 1) and that G divides C and K; `op` names the op in errors.
Geom make_geom(const Params& p, int64_t N, int64_t C, int64_t H, int64_t W, int64_t K, int64_t R, int64_t S,
               const char* op);
// Requires a rank-4 float tensor; `what` names it in errors.
void require_4d(const TensorType& t, const char* what, const char* op);
// An activation's [N,C,H,W]: t plain rank 4, or with p.block channel-blocked [N,C/b,H,W,b].
std::array<int64_t, 4> act_dims(const Params& p, const TensorType& t, const char* what, const char* op);
// The activation type of [N,C,H,W] in p's layout.
TensorType act_type(const Params& p, DType dt, int64_t N, int64_t C, int64_t H, int64_t W);

// col[(c*R + r)*S + s, p*Q + q] = x[c, p*sh - ph + r*dh, q*sw - pw + s*dw] (0 outside), x one image [C,H,W].
// col2im is its adjoint: dx (one image, overwritten) = sum of col entries over the positions they read.
template <class T, bool kAdjoint>
void im2col_impl(const Geom& g, std::conditional_t<kAdjoint, T*, const T*> x, std::conditional_t<kAdjoint, const T*, T*> col) {
  const int64_t PQ = g.PQ();
  if constexpr (kAdjoint) std::fill_n(x, g.C * g.H * g.W, T(0));
  for (int64_t c = 0; c < g.C; ++c) {
    for (int64_t r = 0; r < g.R; ++r) {
      for (int64_t s = 0; s < g.S; ++s) {
        auto* row = col + ((c * g.R + r) * g.S + s) * PQ;
        const int64_t oh = r * g.dh - g.ph, ow = s * g.dw - g.pw;
        // valid q: 0 <= q*sw + ow < W
        const int64_t q0 = std::min(g.Q, ow >= 0 ? 0 : (-ow + g.sw - 1) / g.sw);
        const int64_t q1 = std::clamp<int64_t>(g.W - ow <= 0 ? 0 : (g.W - ow + g.sw - 1) / g.sw, q0, g.Q);
        for (int64_t p = 0; p < g.P; ++p) {
          const int64_t h = p * g.sh + oh;
          auto* out = row + p * g.Q;
          if (h < 0 || h >= g.H) {
            if constexpr (!kAdjoint) std::fill_n(out, g.Q, T(0));
            continue;
          }
          auto* xr = x + (c * g.H + h) * g.W;  // x row h; column q reads xr[q*sw + ow]
          if constexpr (kAdjoint) {
            for (int64_t q = q0; q < q1; ++q) xr[q * g.sw + ow] += out[q];
          } else {
            std::fill_n(out, q0, T(0));
            if (g.sw == 1)
              std::copy(xr + q0 + ow, xr + q1 + ow, out + q0);
            else
              for (int64_t q = q0; q < q1; ++q) out[q] = xr[q * g.sw + ow];
            std::fill_n(out + q1, g.Q - q1, T(0));
          }
        }
      }
    }
  }
}
template <class T>
void im2col(const Geom& g, const T* x, T* col) { im2col_impl<T, false>(g, x, col); }
template <class T>
void col2im(const Geom& g, const T* col, T* dx) { im2col_impl<T, true>(g, dx, col); }

// The oneDNN float32 path. A Pass is one primitive (plus reorders between mnemo's plain nchw/oihw
// tensors and the blocked layouts oneDNN's fast kernels use), created once per node when the plan
// is made (OpDef::prepare): it is the node's state, KernelContext::state in the kernel.
enum class Pass : uint8_t { forward, backward_data, backward_weights };

// One cached oneDNN primitive with its reorders; opaque outside conv2d.cpp.
struct OnednnConv;
// The oneDNN path for (pass, g, bias, p.algo), or null when it is not used (float64, algo=im2col, or
// oneDNN offered no implementation: then im2col runs).
std::shared_ptr<const OnednnConv> onednn_conv(Pass pass, const Geom& g, bool bias, const Params& p, DType dt);
size_t onednn_workspace(const OnednnConv& e);
// A conv node's preparation: the oneDNN primitive (state) and its workspace, or no state and
// `im2col_bytes` when the im2col kernels run. Kernels run oneDNN exactly when their state is set.
Prepared prepare_pass(Pass pass, const Geom& g, bool bias, const Params& p, DType dt, size_t im2col_bytes);
// The channel block of the layout oneDNN's float32 convolutions use on this CPU (16: nChw16c on
// AVX-512, 8: nChw8c on AVX2), 0 when they use none: the block a model keeps its activations in
// (model.layout: blocked).
int64_t onednn_channel_block();
// Runs the pass. Inputs: forward (x, w, b or nullptr) -> y; backward_data (dy, w) -> dx;
// backward_weights (dy, x) -> dw.
void onednn_run(const OnednnConv& e, const void* in0, const void* in1, const void* bias, void* out, void* workspace,
                size_t workspace_bytes);

// A 1x1 kernel with stride 1 and no padding: col is the image itself (no im2col).
inline bool is_pointwise(const Geom& g) {
  return g.R == 1 && g.S == 1 && g.sh == 1 && g.sw == 1 && g.ph == 0 && g.pw == 0;
}

// Threads the im2col kernels use for a batch of n images with `slots` workspace slots.
inline int64_t batch_threads(int64_t n, int64_t slots) {
  if (omp_in_parallel()) return 1;
  return std::max<int64_t>(1, std::min<int64_t>({n, slots, omp_get_max_threads()}));
}

// f(n, t, first) for images n in [0, N) on up to `threads` threads: thread t takes a contiguous
// static chunk (first: n is the chunk's first image), so which thread handles which image depends
// only on N and the thread count. Returns the number of chunks (threads actually used). With one
// thread the loop runs serially and Eigen's GEMM may use the threads itself.
template <class F>
int64_t for_each_image(int64_t N, int64_t threads, F&& f) {
  if (threads <= 1) {
    for (int64_t n = 0; n < N; ++n) f(n, int64_t{0}, n == 0);
    return 1;
  }
  int64_t used = 1;
#pragma omp parallel num_threads(static_cast<int>(threads))
  {
    const int64_t t = omp_get_thread_num(), nt = omp_get_num_threads();
    if (t == 0) used = nt;
    for (int64_t n = N * t / nt; n < N * (t + 1) / nt; ++n) f(n, t, n == N * t / nt);
  }
  return used;
}

}  // namespace mnemo::ops::conv
