// 2-D convolution (cross-correlation, optionally grouped), forward, and the oneDNN driver shared
// with the backward ops in ops/conv2d_grad.cpp.
//   conv2d(x[N,C,H,W], w[K,C/G,R,S] [, b[K]]) -> y[N,K,P,Q]
//   y[n,k,p,q] = b[k] + sum_{c,r,s} w[k,c,r,s] * x[n, g(k)*C/G + c, p*sh - ph + r*dh, q*sw - pw + s*dw]
//   (x is 0 outside [0,H) x [0,W); g(k) = k / (K/G) is k's group),
//   P = (H + 2ph - dh*(R-1) - 1)/sh + 1,  Q alike with W, S.
// attrs: stride, padding, dilation (an int or [h,w]; defaults 1, 0, 1); groups G (default 1; G = C:
//        depthwise, as PyTorch's Conv2d(groups=C));
//        algo "auto" | "im2col" | "winograd" (ops/conv2d.h says what each runs).
// Backward (conv2d_grad.cpp) reads x and w, never y: dx = conv2d_grad_data(dy, w),
// dw = conv2d_grad_weight(dy, x), db = conv2d_grad_bias(dy).
// Kernels: float64 (and algo=im2col): im2col + Eigen GEMM per image, images over threads.
// float32: oneDNN with blocked layouts, reordered from/to mnemo's plain nchw/oihw tensors inside the
// planned workspace (oneDNN's plain-layout kernels are 2-5x slower here, docs/BENCHMARKS.md); a
// convolution whose weights outweigh its activations runs in four parts through a quarter of that
// workspace (weight_parts below).
#include "ops/conv2d.h"

#include <array>
#include <cstdint>
#include <vector>
#include <unordered_map>
#include <oneapi/dnnl/dnnl.hpp>

#include "ops/onednn.h"

namespace mnemo::ops::conv {

Params parse_common(AttrReader& r) {
  Params p;
  auto st = r.get_ints_n("stride", 2, 1), pad = r.get_ints_n("padding", 2, 0), dil = r.get_ints_n("dilation", 2, 1);
  p.sh = st[0], p.sw = st[1], p.ph = pad[0], p.pw = pad[1], p.dh = dil[0], p.dw = dil[1];
  p.groups = r.get_int("groups", 1);
  MNEMO_CHECK(p.groups >= 1 && p.groups <= kMaxConvDim) << "groups must be in [1, 2^24], got " << p.groups;
  MNEMO_CHECK(p.sh >= 1 && p.sw >= 1) << "stride must be >= 1, got [" << p.sh << "," << p.sw << "]";
  MNEMO_CHECK(p.ph >= 0 && p.pw >= 0) << "padding must be >= 0, got [" << p.ph << "," << p.pw << "]";
  MNEMO_CHECK(p.dh >= 1 && p.dw >= 1) << "dilation must be >= 1, got [" << p.dh << "," << p.dw << "]";
  for (int64_t v : {p.sh, p.sw, p.ph, p.pw, p.dh, p.dw})
    MNEMO_CHECK(v <= kMaxConvDim) << "stride, padding and dilation must be at most 2^24, got " << v;
  const std::string algo = r.get_string("algo", "auto");
  MNEMO_CHECK(algo == "auto" || algo == "im2col" || algo == "winograd")
      << "algo must be \"auto\", \"im2col\" or \"winograd\", got \"" << algo << "\"";
  p.algo = algo == "im2col" ? Algo::im2col : algo == "winograd" ? Algo::winograd : Algo::automatic;
  p.block = parse_block_attr(r);
  MNEMO_CHECK(!p.block || (p.groups == 1 && p.algo != Algo::im2col))
      << "block " << p.block << " (channel-blocked activations) runs oneDNN's kernels: it needs groups 1 and algo "
      << "auto or winograd, got groups " << p.groups << ", algo \"" << algo << "\"";
  return p;
}

Attrs common_attrs(const Params& p) {
  Attrs a{{"stride", std::vector<int64_t>{p.sh, p.sw}},
          {"padding", std::vector<int64_t>{p.ph, p.pw}},
          {"dilation", std::vector<int64_t>{p.dh, p.dw}}};
  if (p.groups != 1) a["groups"] = p.groups;
  if (p.algo != Algo::automatic) a["algo"] = std::string(p.algo == Algo::im2col ? "im2col" : "winograd");
  if (p.block) a["block"] = p.block;
  return a;
}

void require_4d(const TensorType& t, const char* what, const char* op) {
  MNEMO_CHECK(is_float(t.dtype) && t.shape.size() == 4)
      << op << ": " << what << " must be a rank-4 float32/float64 tensor, got " << t.str();
}

std::array<int64_t, 4> act_dims(const Params& p, const TensorType& t, const char* what, const char* op) {
  if (!p.block) {
    require_4d(t, what, op);
    return {t.shape[0], t.shape[1], t.shape[2], t.shape[3]};
  }
  MNEMO_CHECK(t.dtype == DType::f32 && t.shape.size() == 5 && t.shape[4] == p.block)
      << op << ": with block " << p.block << ", " << what << " must be a channel-blocked float32 tensor [N,C/" << p.block
      << ",H,W," << p.block << "] (oneDNN's kernels; to_blocked makes one), got " << t.str();
  return {t.shape[0], t.shape[1] * p.block, t.shape[2], t.shape[3]};
}

TensorType act_type(const Params& p, DType dt, int64_t N, int64_t C, int64_t H, int64_t W) {
  return TensorType{dt, p.block ? blocked_shape({N, C, H, W}, p.block) : Shape{N, C, H, W}};
}

Geom make_geom(const Params& p, int64_t N, int64_t C, int64_t H, int64_t W, int64_t K, int64_t R, int64_t S,
               const char* op) {
  MNEMO_CHECK(N >= 1 && C >= 1 && H >= 1 && W >= 1 && K >= 1 && R >= 1 && S >= 1)
      << op << ": empty dimension (N=" << N << " C=" << C << " H=" << H << " W=" << W << " K=" << K << " R=" << R
      << " S=" << S << ")";
  for (int64_t d : {N, C, H, W, K, R, S})
    MNEMO_CHECK(d <= kMaxConvDim) << op << ": dimension " << d << " is larger than 2^24 (N=" << N << " C=" << C << " H=" << H
                                  << " W=" << W << " K=" << K << " R=" << R << " S=" << S << ")";
  MNEMO_CHECK(C % p.groups == 0 && K % p.groups == 0)
      << op << ": groups " << p.groups << " must divide the input channels C=" << C << " and the output channels K=" << K;
  const int64_t eh = p.dh * (R - 1) + 1, ew = p.dw * (S - 1) + 1;  // dilated kernel extent
  MNEMO_CHECK(eh <= H + 2 * p.ph && ew <= W + 2 * p.pw)
      << op << ": kernel " << R << "x" << S << " (dilated extent " << eh << "x" << ew
      << ") is larger than the padded input " << H + 2 * p.ph << "x" << W + 2 * p.pw << " (input " << H << "x" << W
      << ", padding [" << p.ph << "," << p.pw << "])";
  Geom g{N, C, H, W, K, R, S, (H + 2 * p.ph - eh) / p.sh + 1, (W + 2 * p.pw - ew) / p.sw + 1,
         p.sh, p.sw, p.ph, p.pw, p.dh, p.dw, p.groups};
  // oneDNN and cuDNN index tensors with 32-bit integers. A batch past that range is run in pieces
  // (on the CPU by the im2col kernels, which index with 64 bits; on the GPU as cuDNN launches along
  // the batch), one sample cannot be.
  for (const auto& [what, n] : {std::pair<const char*, int64_t>{"one sample of x", numel({C, H, W})},
                                {"w", numel({K, C / p.groups, R, S})}, {"one sample of y", numel({K, g.P, g.Q})},
                                {"im2col columns", numel({C / p.groups, R, S, g.P, g.Q})}})
    MNEMO_CHECK(n <= INT32_MAX) << op << ": " << what << " would have " << n << " elements; convolutions are limited to 2^31 - 1"
                                << " (N=" << N << " C=" << C << " H=" << H << " W=" << W << " K=" << K << ")";
  (void)numel({N, C, H, W});  // the whole batch: checked (2^40 elements at most)
  (void)numel({N, K, g.P, g.Q});
  return g;
}

// ---------------------------------------------------------------------------------------------
// oneDNN driver.
namespace {
using dnnl::memory;
using Tag = memory::format_tag;
constexpr int64_t kAlign = kOnednnAlign;
int64_t aligned(int64_t n) { return (n + kAlign - 1) / kAlign * kAlign; }

dnnl::engine& engine() { return onednn_engine(); }
// mnemo's activations to oneDNN: plain nchw, or with a block already oneDNN's nChw8c / nChw16c.
Tag act_tag(int64_t block) { return block == 8 ? Tag::nChw8c : block == 16 ? Tag::nChw16c : Tag::nchw; }
}  // namespace

// A primitive's operand: mnemo's plain layout (user) and the primitive's layout (inner); when
// they differ, a reorder into/out of a buffer at `offset` in the workspace. `reused`: an input the
// part before reordered already, the same tensor in the same buffer.
struct Operand {
  int arg = 0;
  memory::desc user, inner;
  bool reordered = false, reused = false;
  dnnl::reorder re;
  memory::desc re_scratch;
  int64_t offset = 0;
};

// The primitive runs once per part: the whole convolution, or one of kWeightParts slices of its
// output channels (forward, weight gradient) or input channels (data gradient) with the matching
// slice of the weights (weight_parts below).
struct Part {
  std::array<Operand, 2> in;
  Operand out;
  Operand& operand(int k) { return k < 2 ? in[k] : out; }  // 0, 1: the inputs; 2: the output
};

struct OnednnConv {
  dnnl::primitive prim;
  memory::desc scratch;  // the primitive's scratchpad, at scratch_offset (shared with the reorders)
  std::vector<Part> parts;
  memory::desc bias;
  int64_t scratch_offset = 0, bytes = 0;
};

namespace {

Operand operand(int arg, const memory::desc& user, const memory::desc& inner) {
  Operand o;
  o.arg = arg, o.user = user, o.inner = inner;
  return o;
}

// A convolution whose weights outweigh its activations and take at least 4 MiB (at batch 1 the
// deep layers of ImageNet CNNs: a 512x512 3x3 weight is 9.4 MB, its x and y 0.2 MB) reorders its
// weights, and runs, in kWeightParts slices of the channels the weights are sliced along, through
// a workspace of a quarter of their size. The large one-step workspaces were what kept OLLA's
// ResNet-50 at batch 1 above its live-bytes bound (docs/MEMORY.md "Exact placement"). Slices are
// whole channel blocks (a multiple of 16 channels); no groups, no bias.
constexpr int kWeightParts = 4;
int weight_parts(Pass pass, const Geom& g, bool bias) {
  const int64_t w = g.K * g.C * g.R * g.S, act = g.N * (g.C * g.H * g.W + g.K * g.PQ());
  const int64_t sliced = pass == Pass::backward_data ? g.C : g.K;
  const bool parts = g.G == 1 && !bias && w * 4 >= (int64_t{4} << 20) && w > act && sliced % (kWeightParts * 16) == 0;
  return parts ? kWeightParts : 1;
}

std::shared_ptr<OnednnConv> build(Pass pass, const Geom& whole, bool bias, dnnl::algorithm alg, int64_t block) {
  const int parts = weight_parts(pass, whole, bias);
  Geom g = whole;  // one part's convolution
  (pass == Pass::backward_data ? g.C : g.K) /= parts;
  // Grouped weights are [G, K/G, C/G, R, S] to oneDNN (goihw: the same bytes as mnemo's [K, C/G, R, S]).
  const memory::dims xd{g.N, g.C, g.H, g.W}, yd{g.N, g.K, g.P, g.Q};
  const memory::dims wd = g.G == 1 ? memory::dims{g.K, g.C, g.R, g.S} : memory::dims{g.G, g.Kg(), g.Cg(), g.R, g.S};
  const memory::dims st{g.sh, g.sw}, dil{g.dh - 1, g.dw - 1}, pad{g.ph, g.pw};
  const auto f32 = memory::data_type::f32;
  auto any = [&](const memory::dims& d) { return memory::desc(d, f32, Tag::any); };
  const memory::desc bias_md = bias ? memory::desc({g.K}, f32, Tag::x) : memory::desc();
  dnnl::primitive_attr attr;
  attr.set_scratchpad_mode(dnnl::scratchpad_mode::user);
  const dnnl::convolution_forward::primitive_desc hint(
      {dnnl::prop_kind::forward_training, alg, any(xd), any(wd), bias_md, any(yd), st, dil, pad, pad}, engine());

  auto e = std::make_shared<OnednnConv>();
  // mnemo's whole tensors, and part i's slice of them (the whole tensor when there is one part).
  const memory::desc xw({whole.N, whole.C, whole.H, whole.W}, f32, act_tag(block)),
      ww(g.G == 1 ? memory::dims{whole.K, whole.C, whole.R, whole.S} : wd, f32, g.G == 1 ? Tag::oihw : Tag::goihw),
      yw({whole.N, whole.K, whole.P, whole.Q}, f32, act_tag(block));
  auto slice = [&](const memory::desc& w, const memory::dims& d, int axis, int64_t i) {
    if (parts == 1) return w;
    memory::dims at(d.size(), 0);
    at[axis] = i * d[axis];
    return w.submemory_desc(d, at);
  };
  const bool by_input = pass == Pass::backward_data;  // the weights sliced along C (axis 1), else K (axis 0)
  memory::desc src, weights, dst;  // the primitive's own layouts
  if (pass == Pass::forward) {
    dnnl::convolution_forward::primitive_desc pd(
        {dnnl::prop_kind::forward_training, alg, any(xd), any(wd), bias_md, any(yd), st, dil, pad, pad}, attr, engine());
    e->prim = dnnl::convolution_forward(pd);
    e->scratch = pd.scratchpad_desc();
    src = pd.src_desc(), weights = pd.weights_desc(), dst = pd.dst_desc();
    e->bias = bias_md;
  } else if (pass == Pass::backward_data) {
    dnnl::convolution_backward_data::primitive_desc pd({alg, any(xd), any(wd), any(yd), st, dil, pad, pad}, attr,
                                                       engine(), hint);
    e->prim = dnnl::convolution_backward_data(pd);
    e->scratch = pd.scratchpad_desc();
    src = pd.diff_src_desc(), weights = pd.weights_desc(), dst = pd.diff_dst_desc();
  } else {
    dnnl::convolution_backward_weights::primitive_desc pd({alg, any(xd), any(wd), any(yd), st, dil, pad, pad}, attr,
                                                          engine(), hint);
    e->prim = dnnl::convolution_backward_weights(pd);
    e->scratch = pd.scratchpad_desc();
    src = pd.src_desc(), weights = pd.diff_weights_desc(), dst = pd.diff_dst_desc();
  }
  for (int64_t i = 0; i < parts; ++i) {
    const memory::desc xu = slice(xw, xd, 1, by_input ? i : 0), wu = slice(ww, wd, by_input ? 1 : 0, i),
                       yu = slice(yw, yd, 1, by_input ? 0 : i);
    Part part;
    if (pass == Pass::forward) {
      part.in = {operand(DNNL_ARG_SRC, xu, src), operand(DNNL_ARG_WEIGHTS, wu, weights)};
      part.out = operand(DNNL_ARG_DST, yu, dst);
    } else if (pass == Pass::backward_data) {
      part.in = {operand(DNNL_ARG_DIFF_DST, yu, dst), operand(DNNL_ARG_WEIGHTS, wu, weights)};
      part.out = operand(DNNL_ARG_DIFF_SRC, xu, src);
    } else {
      part.in = {operand(DNNL_ARG_DIFF_DST, yu, dst), operand(DNNL_ARG_SRC, xu, src)};
      part.out = operand(DNNL_ARG_DIFF_WEIGHTS, wu, weights);
    }
    e->parts.push_back(std::move(part));
  }
  int64_t top = 0, scratch = static_cast<int64_t>(e->scratch.get_size());
  // Every part's operand k in the same workspace buffer (the parts run one after another),
  // reserved when any part reorders (part 0's slice can be the primitive's own layout where a
  // later part's, offset, is not). An input every part reads whole is reordered once, by part 0.
  for (int k = 0; k < 3; ++k) {
    bool any = false;
    for (size_t i = 0; i < e->parts.size(); ++i) {
      Operand& o = e->parts[i].operand(k);
      if (o.inner == o.user) continue;
      o.reordered = any = true;
      o.offset = top;
      o.reused = i > 0 && k < 2 && o.user == e->parts[0].operand(k).user;
      if (o.reused) continue;
      const dnnl::reorder::primitive_desc rpd = k < 2 ? dnnl::reorder::primitive_desc(engine(), o.user, engine(), o.inner, attr)
                                                      : dnnl::reorder::primitive_desc(engine(), o.inner, engine(), o.user, attr);
      o.re = dnnl::reorder(rpd);
      o.re_scratch = rpd.scratchpad_desc();
      scratch = std::max(scratch, static_cast<int64_t>(o.re_scratch.get_size()));
    }
    if (any) top += aligned(static_cast<int64_t>(e->parts[0].operand(k).inner.get_size()));
  }
  e->scratch_offset = top;
  e->bytes = top + scratch + (top + scratch ? kAlign : 0);  // + kAlign: room to align the base (run())
  return e;
}

// oneDNN indexes with 32 bits: a batch whose x or y is past that range runs on the im2col kernels.
bool past_int32(const Geom& g) { return g.N * g.C * g.H * g.W > INT32_MAX || g.N * g.K * g.PQ() > INT32_MAX; }

}  // namespace

std::shared_ptr<const OnednnConv> onednn_conv(Pass pass, const Geom& g, bool bias, const Params& p, DType dt) {
  if (dt != DType::f32 || p.algo == Algo::im2col || past_int32(g)) return nullptr;
  // No oneDNN implementation: Winograd falls back to direct, direct to im2col (the choice is the
  // node's prepared state, so the planned workspace and the kernel agree).
  if (p.algo == Algo::winograd) {
    try {
      return build(pass, g, bias, dnnl::algorithm::convolution_winograd, p.block);
    } catch (const dnnl::error&) {
    }
  }
  try {
    return build(pass, g, bias, dnnl::algorithm::convolution_direct, p.block);
  } catch (const dnnl::error&) {
  }
  return nullptr;
}

Prepared prepare_pass(Pass pass, const Geom& g, bool bias, const Params& p, DType dt, size_t im2col_bytes) {
  if (auto e = onednn_conv(pass, g, bias, p, dt)) return {e, onednn_workspace(*e)};
  MNEMO_CHECK(!p.block) << "conv2d (block " << p.block << "): oneDNN offers no kernel for N=" << g.N << " C=" << g.C << " "
                        << g.H << "x" << g.W << " K=" << g.K << " " << g.R << "x" << g.S
                        << (past_int32(g) ? " (x or y past 2^31 - 1 elements, oneDNN's 32-bit range: not asked)" : "")
                        << "; the im2col kernels need plain [N,C,H,W] activations (no block): build the model "
                        << "with model.layout: plain";
  return {nullptr, im2col_bytes};
}

int64_t onednn_channel_block() {
  static const int64_t block = [] {
    try {  // a typical 3x3 convolution of 64 channels: the source layout oneDNN asks for
      const memory::dims xd{2, 64, 8, 8}, wd{64, 64, 3, 3}, st{1, 1}, dil{0, 0}, pad{1, 1};
      const auto f32 = memory::data_type::f32;
      const dnnl::convolution_forward::primitive_desc pd(
          {dnnl::prop_kind::forward_training, dnnl::algorithm::convolution_direct, memory::desc(xd, f32, Tag::any),
           memory::desc(wd, f32, Tag::any), memory::desc(), memory::desc(xd, f32, Tag::any), st, dil, pad, pad},
          engine());
      for (const int64_t b : {16, 8})
        if (pd.src_desc() == memory::desc(xd, f32, act_tag(b))) return b;
    } catch (const dnnl::error&) {
    }
    return int64_t{0};
  }();
  return block;
}

size_t onednn_workspace(const OnednnConv& e) { return static_cast<size_t>(e.bytes); }

void onednn_run(const OnednnConv& e, const void* in0, const void* in1, const void* bias, void* out, void* workspace,
                size_t workspace_bytes) {
  MNEMO_ASSERT(workspace_bytes >= static_cast<size_t>(e.bytes))
      << "conv2d (oneDNN): workspace of " << workspace_bytes << " bytes, needs " << e.bytes;
  // Some oneDNN kernels (Winograd) need 64-byte aligned buffers; planned workspaces are, but the
  // kernel API does not promise it, so align the base (build() reserved the room).
  char* ws = onednn_aligned(workspace);
  dnnl::engine& eng = engine();
  dnnl::stream& stream = onednn_stream();
  auto scratch_args = [&](std::unordered_map<int, memory>& args, const memory::desc& md) {
    if (md.get_size()) args.emplace(DNNL_ARG_SCRATCHPAD, memory(md, eng, ws + e.scratch_offset));
  };
  try {
    for (const Part& part : e.parts) {
      std::unordered_map<int, memory> args;
      const void* ins[2] = {in0, in1};
      for (int i = 0; i < 2; ++i) {
        const Operand& o = part.in[i];
        memory user(o.user, eng, const_cast<void*>(ins[i]));
        if (!o.reordered) {
          args.emplace(o.arg, user);
          continue;
        }
        memory inner(o.inner, eng, ws + o.offset);
        if (!o.reused) {
          std::unordered_map<int, memory> rargs{{DNNL_ARG_FROM, user}, {DNNL_ARG_TO, inner}};
          scratch_args(rargs, o.re_scratch);
          o.re.execute(stream, rargs);
        }
        args.emplace(o.arg, inner);
      }
      if (bias) args.emplace(DNNL_ARG_BIAS, memory(e.bias, eng, const_cast<void*>(bias)));
      memory user_out(part.out.user, eng, out);
      memory inner_out = part.out.reordered ? memory(part.out.inner, eng, ws + part.out.offset) : user_out;
      args.emplace(part.out.arg, inner_out);
      scratch_args(args, e.scratch);
      e.prim.execute(stream, args);
      if (part.out.reordered) {
        std::unordered_map<int, memory> rargs{{DNNL_ARG_FROM, inner_out}, {DNNL_ARG_TO, user_out}};
        scratch_args(rargs, part.out.re_scratch);
        part.out.re.execute(stream, rargs);
      }
    }
    stream.wait();
  } catch (const dnnl::error& err) {
    MNEMO_FAIL() << "conv2d (oneDNN): " << err.what();
  }
}

// ---------------------------------------------------------------------------------------------
// conv2d forward.
namespace {

Params parse_conv2d(AttrReader& r) { return parse_common(r); }

Geom forward_geom(const Params& p, const TensorType& x, const TensorType& w, const TensorType* b) {
  const auto [N, C, H, W] = act_dims(p, x, "x", "conv2d");
  require_4d(w, "w", "conv2d");
  MNEMO_CHECK(x.dtype == w.dtype) << "conv2d: x and w must have the same dtype, got " << x.str() << " and " << w.str();
  MNEMO_CHECK(C == w.shape[1] * p.groups)
      << "conv2d: x " << x.str() << " has C=" << C << " channels but w [K,C/G,R,S] " << w.str()
      << " with groups G=" << p.groups << " expects C=" << w.shape[1] * p.groups;
  if (b) {
    MNEMO_CHECK(!p.block) << "conv2d: a bias with block " << p.block
                          << " (channel-blocked activations) is not supported; let a batch_norm or add carry it";
    MNEMO_CHECK(b->dtype == x.dtype && b->shape == Shape{w.shape[0]})
        << "conv2d: bias must be " << TensorType{x.dtype, {w.shape[0]}}.str() << " (K of w), got " << b->str();
  }
  MNEMO_CHECK(!p.block || w.shape[0] % p.block == 0)
      << "conv2d: with block " << p.block << " the output channels K=" << w.shape[0] << " must be a multiple of it";
  return make_geom(p, N, C, H, W, w.shape[0], w.shape[2], w.shape[3], "conv2d");
}
Geom forward_geom(const Params& p, std::span<const TensorType> in) {
  return forward_geom(p, in[0], in[1], in.size() > 2 ? &in[2] : nullptr);
}

std::vector<TensorType> infer_conv2d(const void* params, std::span<const TensorType> in) {
  const Params& p = *static_cast<const Params*>(params);
  const Geom g = forward_geom(p, in);
  return {act_type(p, in[0].dtype, g.N, g.K, g.P, g.Q)};
}

// im2col path: one col buffer [CRS, PQ] (one group's) per thread (none for pointwise kernels).
int64_t forward_col_elems(const Geom& g) { return is_pointwise(g) ? 0 : g.CRS() * g.PQ(); }

Prepared prepare_conv2d(const void* params, std::span<const TensorType> in, std::span<const TensorType>) {
  const Params& p = *static_cast<const Params*>(params);
  const Geom g = forward_geom(p, in);
  return prepare_pass(Pass::forward, g, in.size() > 2, p, in[0].dtype,
                      static_cast<size_t>(batch_threads(g.N, g.N) * forward_col_elems(g)) * dtype_size(in[0].dtype));
}

template <class T>
void forward_im2col(const Geom& g, const T* x, const T* w, const T* b, T* y, T* ws, size_t ws_bytes) {
  const Geom gg = g.group();
  const int64_t per = forward_col_elems(g), CRS = g.CRS(), PQ = g.PQ(), Kg = g.Kg();
  const int64_t slots = per ? static_cast<int64_t>(ws_bytes / (per * sizeof(T))) : g.N;
  MNEMO_CHECK(slots >= 1) << "conv2d: workspace of " << ws_bytes << " bytes, needs " << per * sizeof(T);
  for_each_image(g.N, batch_threads(g.N, slots), [&](int64_t n, int64_t t, bool) {
    T* col = ws + t * per;
    for (int64_t gi = 0; gi < g.G; ++gi) {
      const T* xn = x + (n * g.C + gi * gg.C) * g.H * g.W;
      if (per) im2col(gg, xn, col);
      MatMap<T> yn(y + (n * g.K + gi * Kg) * PQ, Kg, PQ);
      yn.noalias() = ConstMatMap<T>(w + gi * Kg * CRS, Kg, CRS) * ConstMatMap<T>(per ? col : xn, CRS, PQ);
      if (b) yn.colwise() += ConstVecMap<T>(b + gi * Kg, Kg);
    }
  });
}

void conv2d_cpu(const KernelContext& c) {
  const Params& p = c.p<Params>();
  const bool bias = c.in.size() > 2;
  const Geom g = forward_geom(p, c.in[0].type, c.in[1].type, bias ? &c.in[2].type : nullptr);
  if (const auto* e = static_cast<const OnednnConv*>(c.state)) {
    onednn_run(*e, c.in[0].data, c.in[1].data, bias ? c.in[2].data : nullptr, c.out[0].data, c.workspace,
               c.workspace_bytes);
    return;
  }
  MNEMO_ASSERT(!p.block) << "conv2d: block " << p.block << " without its oneDNN primitive (the node was not prepared)";
  dispatch_float(c.in[0].dtype(), "conv2d", [&]<class T>() {
    forward_im2col<T>(g, c.in[0].as<T>(), c.in[1].as<T>(), bias ? c.in[2].as<T>() : nullptr, c.out[0].as<T>(),
                      static_cast<T*>(c.workspace), c.workspace_bytes);
  });
}

std::vector<std::optional<EntryRef>> grad_conv2d(Graph& g, const GradContext& c) {
  std::vector<std::optional<EntryRef>> r(c.inputs.size());
  if (!c.dout[0]) return r;
  const Params& p = c.p<Params>();
  const EntryRef dy = *c.dout[0];
  const TensorType& x = g.type(c.inputs[0]);
  const TensorType& w = g.type(c.inputs[1]);
  Attrs ad = common_attrs(p), aw = common_attrs(p);
  ad["input_hw"] = std::vector<int64_t>{x.shape[2], x.shape[3]};
  aw["kernel"] = std::vector<int64_t>{w.shape[2], w.shape[3]};
  r[0] = g.add1("conv2d_grad_data", {dy, c.inputs[1]}, std::move(ad));
  r[1] = g.add1("conv2d_grad_weight", {dy, c.inputs[0]}, std::move(aw));
  if (c.inputs.size() > 2) r[2] = g.add1("conv2d_grad_bias", {dy});
  return r;
}

}  // namespace
}  // namespace mnemo::ops::conv

MNEMO_REGISTER_OPS(conv2d) {
  using namespace mnemo;
  using namespace mnemo::ops::conv;
  OpDef d;
  d.name = "conv2d";
  d.doc = "y[N,K,P,Q] = conv(x[N,C,H,W], w[K,C/G,R,S]) (+ b[K]); attrs stride, padding, dilation, groups G";
  d.min_inputs = 2;
  d.max_inputs = 3;
  d.parse = parse_with(parse_conv2d, "conv2d");
  d.infer = infer_conv2d;
  d.grad = grad_conv2d;
  d.cost = [](const void* params, std::span<const TensorType> in, std::span<const TensorType> out) {
    return Cost{forward_geom(*static_cast<const Params*>(params), in).flops(), io_bytes(in, out)};
  };
  d.prepare = prepare_conv2d;
  d.cpu = conv2d_cpu;
  // Grouped (G = 2) with an asymmetric kernel, stride and dilation: the registry's tests (gradient
  // check, float32 vs float64, in place, GPU parity) cover groups; tests/ops/conv2d_test.cpp the rest.
  d.sample = OpSample{{{"stride", std::vector<int64_t>{2, 1}}, {"padding", int64_t{1}}, {"dilation", std::vector<int64_t>{1, 2}},
                       {"groups", int64_t{2}}},
                      {TensorType{DType::f32, {2, 4, 6, 5}}, TensorType{DType::f32, {6, 2, 3, 2}},
                       TensorType{DType::f32, {6}}}};
  registry.add(std::move(d));
}
