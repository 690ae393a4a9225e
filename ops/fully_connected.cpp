// Fully connected (dense) layer in the PyTorch Linear layout, and its backward ops.
//   fully_connected(x[N,D], w[M,D] [, b[M]])      y[N,M]  = x w^T (+ b)
//   fully_connected_grad_data(dy[N,M], w[M,D])     dx[N,D] = dy w
//   fully_connected_grad_weight(dy[N,M], x[N,D] [, sum[M,D]])   dw[M,D] = dy^T x (+ sum)
//   fully_connected_grad_bias(dy[N,M])             db[M]   = sum_n dy[n,:]  (n in order: deterministic)
// N batch, D input features, M output features. float32: the forward is oneDNN's matmul primitive
// (prepared per node); in a build with MKL (scripts/build.sh) the weight gradient accumulated into
// a running sum is MKL's sgemm, and the overwriting products (dy^T x; dy w from 64 batch rows) are
// MKL's on Intel CPUs; else dy^T x is oneDNN's sgemm and dy w from 64 rows oneDNN's matmul
// primitive; dy w below 64 rows (kMatmulDataRows) is oneDNN's sgemm everywhere. MNEMO_CPU_GEMM=mkl
// or onednn puts every backward product on one library (use_mkl); float64: Eigen. All
// multithreaded with OpenMP; each product costs 2*N*M*D flops.
#include <oneapi/dnnl/dnnl.h>
#ifdef MNEMO_WITH_MKL
#include <mkl_cblas.h>
#endif

#if defined(__x86_64__) || defined(__i386__)
#include <cpuid.h>
#endif
#include <cstdint>
#include <oneapi/dnnl/dnnl.hpp>

#include <cstdlib>
#include <cstring>
#include <string>
#include <unordered_map>

#include "ops/fully_connected.h"

#include "ops/common.h"
#include "ops/onednn.h"

namespace mnemo::ops {
namespace {

double gemm_flops(int64_t n, int64_t m, int64_t d) {
  return 2.0 * static_cast<double>(n) * static_cast<double>(m) * static_cast<double>(d);
}

void require_matrix(const TensorType& t, const char* what) {
  require_float(t, what);
  MNEMO_CHECK(t.shape.size() == 2) << what << " must be a matrix (rank 2), got " << t.str();
}

// ---- forward ----

std::vector<TensorType> infer_fc(const void*, std::span<const TensorType> in) {
  const TensorType& x = in[0];
  const TensorType& w = in[1];
  require_matrix(x, "fully_connected: x [N,D]");
  require_matrix(w, "fully_connected: w [M,D]");
  MNEMO_CHECK(x.dtype == w.dtype) << "fully_connected: x and w must have the same dtype, got " << x.str() << " and "
                                  << w.str();
  MNEMO_CHECK(x.shape[1] == w.shape[1]) << "fully_connected: x [N,D] and w [M,D] must agree on D, got x "
                                        << x.str() << " and w " << w.str();
  if (in.size() == 3) {
    const TensorType& b = in[2];
    const TensorType want{x.dtype, {w.shape[0]}};
    MNEMO_CHECK(b == want) << "fully_connected: bias must be " << want.str() << " (one per output feature), got "
                           << b.str();
  }
  return {TensorType{x.dtype, {x.shape[0], w.shape[0]}}};
}

#ifdef MNEMO_WITH_MKL
constexpr bool kWithMkl = true;
#else
constexpr bool kWithMkl = false;
#endif

// Whether this process runs on an Intel CPU (cpuid's vendor string): MKL's sgemm is fast there and
// takes a slow path on others (docs/BENCHMARKS.md "A second CPU": 120-193 GFLOP/s on an AMD EPYC
// where oneDNN's sgemm ran the same products at 323-469).
bool cpu_is_intel() {
  static const bool intel = [] {
#if defined(__x86_64__) || defined(__i386__)
    unsigned a = 0, b = 0, c = 0, d = 0;
    if (!__get_cpuid(0, &a, &b, &c, &d)) return false;
    char vendor[13];
    std::memcpy(vendor, &b, 4), std::memcpy(vendor + 4, &d, 4), std::memcpy(vendor + 8, &c, 4);
    vendor[12] = 0;
    return std::strcmp(vendor, "GenuineIntel") == 0;
#else
    return false;
#endif
  }();
  return intel;
}

// The two kinds of backward product, whose fastest library differs off Intel CPUs: one that
// overwrites its output (dw = dy^T x, dx = dy w), and the weight gradient accumulated into the
// running sum of a weight read at many steps (dw = sum + dy^T x: an LSTM's 63 of 64 time steps).
enum class Product { overwrite, accumulate };

// Whether a backward product takes MKL's sgemm (in a build with MKL). By default: the accumulating
// one always, the overwriting ones on Intel CPUs only. In the LSTM step on an AMD EPYC (2026-11-28,
// each call timed) oneDNN's sgemm overwrote at 323-387 GFLOP/s against MKL's 128-138, but
// accumulated at 171-182 against MKL's 207-217; on Intel VMs MKL was ahead of oneDNN on both
// (2026-11-27). MNEMO_CPU_GEMM=mkl or onednn puts every backward product on one library (onednn:
// the choices of a build without MKL, oneDNN's sgemm and matmul primitive), so that one build
// can run the op's tests every way (tests/CMakeLists.txt). Read once; any other value is an error
// naming the variable (thrown again at each call, so never a silent default).
bool use_mkl(Product p) {
  static const int forced = [] {  // -1: by the rule above; 0: oneDNN; 1: MKL
    const char* env = std::getenv("MNEMO_CPU_GEMM");
    const std::string v = env ? env : "";
    if (v.empty()) return -1;
    MNEMO_CHECK(v == "mkl" || v == "onednn")
        << "environment variable MNEMO_CPU_GEMM: expected mkl or onednn (the library of fully_connected's "
           "backward products), got '" << v << "'";
    MNEMO_CHECK(v == "onednn" || kWithMkl)
        << "MNEMO_CPU_GEMM=mkl: this build has no MKL (scripts/build.sh installs it unless MNEMO_MKL=0)";
    return v == "mkl" ? 1 : 0;
  }();
  if (forced >= 0) return forced == 1;
  return kWithMkl && (p == Product::accumulate || cpu_is_intel());
}

// Row-major C[M,N] = op(A) op(B): float32 through MKL's sgemm where `mkl` asks for it (use_mkl),
// else oneDNN's sgemm; float64 through Eigen.
// ta / tb: whether A / B are stored transposed ([K,M] / [N,K]). beta: 0 overwrites C, 1 adds the product to it.
template <class T>
void gemm(bool ta, bool tb, int64_t M, int64_t N, int64_t K, const T* A, const T* B, T* C, T beta = T(0),
          [[maybe_unused]] bool mkl = false) {
  if constexpr (std::is_same_v<T, float>) {
#ifdef MNEMO_WITH_MKL
    if (mkl) {
      cblas_sgemm(CblasRowMajor, ta ? CblasTrans : CblasNoTrans, tb ? CblasTrans : CblasNoTrans, M, N, K, 1.0f, A,
                  ta ? M : K, B, tb ? K : N, beta, C, N);
      return;
    }
#endif
    const dnnl_status_t st = dnnl_sgemm(ta ? 'T' : 'N', tb ? 'T' : 'N', M, N, K, 1.0f, A, ta ? M : K, B, tb ? K : N, beta, C, N);
    MNEMO_CHECK(st == dnnl_success) << "oneDNN sgemm failed with status " << static_cast<int>(st) << " for M=" << M
                                    << " N=" << N << " K=" << K;
  } else {
    using Map = Eigen::Map<const Mat<T>>;
    MatMap<T> c(C, M, N);
    MNEMO_ASSERT(beta == T(0) || beta == T(1)) << "gemm: beta must be 0 or 1";
    auto store = [&](const auto& product) {
      if (beta == T(0)) c.noalias() = product;
      else c.noalias() += product;
    };
    if (!ta && !tb) store(Map(A, M, K) * Map(B, K, N));
    else if (!ta && tb) store(Map(A, M, K) * Map(B, N, K).transpose());
    else if (ta && !tb) store(Map(A, K, M).transpose() * Map(B, K, N));
    else store(Map(A, K, M).transpose() * Map(B, N, K).transpose());
  }
}

// The float32 forward as oneDNN's matmul primitive, made once per node shape (the kernel cache of
// CpuDevice::prepare): y = x w^T + b with the transpose as strides and the bias fused; its
// scratchpad in the node's planned workspace (user mode: oneDNN allocates nothing). On the Intel
// VM of 2026-11-25 it ran the LSTM's forward shapes at 141-178 GFLOP/s against sgemm's 54-90;
// on an AMD one the two were equal (docs/BENCHMARKS.md "GEMM libraries").
struct FcMatmul {
  dnnl::matmul prim;
  dnnl::memory::desc src, wei, bias, dst, scratch;
  bool has_bias = false;
};
constexpr size_t kScratchAlign = kOnednnAlign;
dnnl::engine& engine() { return onednn_engine(); }

// dst[n,k] = src[n,j] wei[j,k] (+ bias[k]) for row-major src [n,j] and dst [n,k], and wei given by
// its strides (transposed or not); null when oneDNN has no matmul for the shape.
std::shared_ptr<FcMatmul> make_matmul(int64_t n, int64_t j, int64_t k, const dnnl::memory::dims& wei_strides, bool bias) {
  using md = dnnl::memory::desc;
  using dt = dnnl::memory::data_type;
  auto e = std::make_shared<FcMatmul>();
  e->src = md({n, j}, dt::f32, dnnl::memory::dims{j, 1});
  e->wei = md({j, k}, dt::f32, wei_strides);
  e->dst = md({n, k}, dt::f32, dnnl::memory::dims{k, 1});
  e->has_bias = bias;
  if (bias) e->bias = md({1, k}, dt::f32, dnnl::memory::dims{k, 1});
  dnnl::primitive_attr attr;
  attr.set_scratchpad_mode(dnnl::scratchpad_mode::user);
  try {
    const auto pd = bias ? dnnl::matmul::primitive_desc(dnnl::matmul::desc(e->src, e->wei, e->bias, e->dst), attr, engine())
                         : dnnl::matmul::primitive_desc(dnnl::matmul::desc(e->src, e->wei, e->dst), attr, engine());
    e->scratch = pd.scratchpad_desc();
    e->prim = dnnl::matmul(pd);
  } catch (const dnnl::error&) {
    return nullptr;
  }
  return e;
}

Prepared prepared(std::shared_ptr<FcMatmul> e) {
  if (!e) return {};  // sgemm
  const size_t ws = e->scratch.get_size() ? e->scratch.get_size() + kScratchAlign : 0;
  return {e, ws};
}

Prepared prepare_fc(const void*, std::span<const TensorType> in, std::span<const TensorType>) {
  if (in[0].dtype != DType::f32) return {};  // float64: Eigen (fc_cpu)
  const int64_t n = in[0].shape[0], d = in[0].shape[1], m = in[1].shape[0];
  return prepared(make_matmul(n, d, m, {1, d}, in.size() == 3));  // w [M,D] read as w^T [D,M]
}

void fc_matmul(const FcMatmul& e, const KernelContext& c) {
  dnnl::engine& eng = engine();
  std::unordered_map<int, dnnl::memory> args{
      {DNNL_ARG_SRC, dnnl::memory(e.src, eng, const_cast<void*>(c.in[0].data))},
      {DNNL_ARG_WEIGHTS, dnnl::memory(e.wei, eng, const_cast<void*>(c.in[1].data))},
      {DNNL_ARG_DST, dnnl::memory(e.dst, eng, c.out[0].data)}};
  if (e.has_bias) args.emplace(DNNL_ARG_BIAS, dnnl::memory(e.bias, eng, const_cast<void*>(c.in[2].data)));
  if (const size_t need = e.scratch.get_size()) {
    MNEMO_ASSERT(c.workspace && c.workspace_bytes >= need + kScratchAlign)
        << "fully_connected (oneDNN matmul): workspace of " << c.workspace_bytes << " bytes, needs " << need + kScratchAlign;
    args.emplace(DNNL_ARG_SCRATCHPAD, dnnl::memory(e.scratch, eng, onednn_aligned(c.workspace)));
  }
  try {
    e.prim.execute(onednn_stream(), args);
    onednn_stream().wait();
  } catch (const dnnl::error& err) {
    MNEMO_FAIL() << "fully_connected (oneDNN matmul) failed: " << err.what();
  }
}

void fc_cpu(const KernelContext& c) {
  if (const auto* e = static_cast<const FcMatmul*>(c.state)) {
    fc_matmul(*e, c);
    return;
  }
  dispatch_float(c.in[0].dtype(), "fully_connected", [&]<class T>() {
    const int64_t n = c.in[0].dim(0), m = c.in[1].dim(0), d = c.in[0].dim(1);
    gemm<T>(false, true, n, m, d, c.in[0].as<T>(), c.in[1].as<T>(), c.out[0].as<T>());  // y = x w^T
    if (c.in.size() == 3) {
      const T* b = c.in[2].as<T>();
      T* yp = c.out[0].as<T>();
      auto rows = [&](int64_t lo, int64_t hi) {
        for (int64_t i = lo; i < hi; ++i)
          for (int64_t j = 0; j < m; ++j) yp[i * m + j] += b[j];
      };
      if (n * m < kParallelGrain) {
        rows(0, n);
      } else {
        parallel_for(n, [&](int64_t i) { rows(i, i + 1); });
      }
    }
  });
}

// ---- backward ----

std::vector<TensorType> infer_grad_data(const void*, std::span<const TensorType> in) {
  const TensorType& dy = in[0];
  const TensorType& w = in[1];
  require_matrix(dy, "fully_connected_grad_data: dy [N,M]");
  require_matrix(w, "fully_connected_grad_data: w [M,D]");
  MNEMO_CHECK(dy.dtype == w.dtype && dy.shape[1] == w.shape[0])
      << "fully_connected_grad_data: dy [N,M] and w [M,D] must agree on M and dtype, got " << dy.str() << " and "
      << w.str();
  return {TensorType{dy.dtype, {dy.shape[0], w.shape[1]}}};
}

// The backward products' libraries, measured at the LSTM shapes with tools/gemm_vs_pytorch.py
// on Intel Xeon VMs (2 threads; five runs of 2026-11-27, docs/BENCHMARKS.md "GEMM libraries" and
// "MKL for the backward products"):
//   dx = dy w from kMatmulDataRows batch rows on: MKL's sgemm in a build with MKL (64x1024->4096:
//     ahead of the matmul primitive in 3 of 5 runs, within the noise), else oneDNN's matmul
//     primitive (144 GFLOP/s against oneDNN sgemm's 114 on 2026-11-26); below: oneDNN's sgemm
//     (32x512->2048 and ->5000: ahead of MKL in 8 of 10 shape-runs);
//   dw = dy^T x: MKL's sgemm in a build with MKL (ahead of oneDNN's sgemm in 11 of 15 shape-runs,
//     126-294 GFLOP/s against 171-260; PyTorch's mm 185-247), else oneDNN's sgemm.
// On AMD VMs (2026-11-21, 2026-11-28) MKL was the slowest library for the products that overwrite
// (it takes a slow path off Intel CPUs), so those go to oneDNN there (use_mkl); in the LSTM step
// it was still the fastest at accumulating.
constexpr int64_t kMatmulDataRows = 64;
Prepared prepare_grad_data(const void*, std::span<const TensorType> in, std::span<const TensorType>) {
  if (use_mkl(Product::overwrite) || in[0].dtype != DType::f32 || in[0].shape[0] < kMatmulDataRows) return {};
  const int64_t n = in[0].shape[0], m = in[0].shape[1], d = in[1].shape[1];
  return prepared(make_matmul(n, m, d, {d, 1}, false));  // w [M,D] as it is
}

void grad_data_cpu(const KernelContext& c) {
  if (const auto* e = static_cast<const FcMatmul*>(c.state)) {
    fc_matmul(*e, c);
    return;
  }
  dispatch_float(c.in[0].dtype(), "fully_connected_grad_data", [&]<class T>() {
    const int64_t n = c.in[0].dim(0), m = c.in[1].dim(0), d = c.in[1].dim(1);
    gemm<T>(false, false, n, d, m, c.in[0].as<T>(), c.in[1].as<T>(), c.out[0].as<T>(), T(0), n >= kMatmulDataRows && use_mkl(Product::overwrite));  // dx = dy w
  });
}

std::vector<TensorType> infer_grad_weight(const void*, std::span<const TensorType> in) {
  const TensorType& dy = in[0];
  const TensorType& x = in[1];
  require_matrix(dy, "fully_connected_grad_weight: dy [N,M]");
  require_matrix(x, "fully_connected_grad_weight: x [N,D]");
  MNEMO_CHECK(dy.dtype == x.dtype && dy.shape[0] == x.shape[0])
      << "fully_connected_grad_weight: dy [N,M] and x [N,D] must agree on N and dtype, got " << dy.str() << " and "
      << x.str();
  const TensorType dw{dy.dtype, {dy.shape[1], x.shape[1]}};
  if (in.size() == 3) {
    MNEMO_CHECK(in[2] == dw) << "fully_connected_grad_weight: the sum to accumulate into must be " << dw.str()
                             << " (dw's type), got " << in[2].str();
  }
  return {dw};
}

void grad_weight_cpu(const KernelContext& c) {
  dispatch_float(c.in[0].dtype(), "fully_connected_grad_weight", [&]<class T>() {
    const int64_t n = c.in[0].dim(0), m = c.in[0].dim(1), d = c.in[1].dim(1);
    T* dw = c.out[0].as<T>();
    if (c.in.size() == 2) {
      gemm<T>(true, false, m, d, n, c.in[0].as<T>(), c.in[1].as<T>(), dw, T(0), use_mkl(Product::overwrite));  // dw = dy^T x
      return;
    }
    // dw = sum + dy^T x: the GEMM accumulates into the output holding the sum (in place when the
    // planner put it there, else copied first), one pass over dw instead of a product and an add.
    const T* sum = c.in[2].as<T>();
    if (sum != dw) std::memcpy(dw, sum, static_cast<size_t>(m * d) * sizeof(T));
    gemm<T>(true, false, m, d, n, c.in[0].as<T>(), c.in[1].as<T>(), dw, T(1), use_mkl(Product::accumulate));
  });
}

std::vector<TensorType> infer_grad_bias(const void*, std::span<const TensorType> in) {
  require_matrix(in[0], "fully_connected_grad_bias: dy [N,M]");
  return {TensorType{in[0].dtype, {in[0].shape[1]}}};
}

// db[j] (+)= dy[0..N-1, j] added in row order in double, whichever thread owns column j (a float
// sum over many rows drifted: 3.5e-4 relative at 65536 equal rows; the convolutions' and batch
// norms' sums are in double too).
template <class T>
void column_sums(const T* dy, int64_t n, int64_t m, T* db, bool accumulate) {
  auto columns = [&](int64_t lo, int64_t hi) {  // (at most 64 columns)
    double acc[64];
    for (int64_t j = lo; j < hi; ++j) acc[j - lo] = accumulate ? static_cast<double>(db[j]) : 0.0;
    for (int64_t i = 0; i < n; ++i)
      for (int64_t j = lo; j < hi; ++j) acc[j - lo] += static_cast<double>(dy[i * m + j]);
    for (int64_t j = lo; j < hi; ++j) db[j] = static_cast<T>(acc[j - lo]);
  };
  if (n * m < kParallelGrain || m < 64) {
    for (int64_t lo = 0; lo < m; lo += 64) columns(lo, std::min(m, lo + 64));
  } else {
    parallel_for((m + 63) / 64, [&](int64_t blk) { columns(blk * 64, std::min(m, (blk + 1) * 64)); });
  }
}

void grad_bias_cpu(const KernelContext& c) {
  dispatch_float(c.in[0].dtype(), "fully_connected_grad_bias", [&]<class T>() {
    column_sums(c.in[0].as<T>(), c.in[0].dim(0), c.in[0].dim(1), c.out[0].as<T>(), false);
  });
}

}  // namespace

void fc_gemm(bool ta, bool tb, int64_t M, int64_t N, int64_t K, const float* A, const float* B, float* C, bool accumulate) {
  gemm<float>(ta, tb, M, N, K, A, B, C, accumulate ? 1.0f : 0.0f, use_mkl(accumulate ? Product::accumulate : Product::overwrite));
}

void fc_gemm(bool ta, bool tb, int64_t M, int64_t N, int64_t K, const double* A, const double* B, double* C, bool accumulate) {
  gemm<double>(ta, tb, M, N, K, A, B, C, accumulate ? 1.0 : 0.0);
}

void fc_bias_sums(const float* dy, int64_t n, int64_t m, float* db, bool accumulate) { column_sums(dy, n, m, db, accumulate); }
void fc_bias_sums(const double* dy, int64_t n, int64_t m, double* db, bool accumulate) { column_sums(dy, n, m, db, accumulate); }

const char* cpu_gemm_library() {
  const bool over = use_mkl(Product::overwrite), acc = use_mkl(Product::accumulate);
  return over ? "MKL" : acc ? "MKL accumulating, oneDNN overwriting" : "oneDNN";  // (use_mkl never gives MKL overwriting alone)
}

}  // namespace mnemo::ops

MNEMO_REGISTER_OPS(fully_connected) {
  using namespace mnemo;
  using namespace mnemo::ops;
  {
    OpDef d;
    d.name = "fully_connected";
    d.doc = "y[N,M] = x[N,D] w[M,D]^T (+ b[M])";
    d.min_inputs = 2;
    d.max_inputs = 3;
    d.infer = infer_fc;
    d.grad = [](Graph& g, const GradContext& c) -> std::vector<std::optional<EntryRef>> {
      const EntryRef dy = *c.dout[0];
      std::vector<std::optional<EntryRef>> dx{g.add1("fully_connected_grad_data", {dy, c.inputs[1]}),
                                              g.add1("fully_connected_grad_weight", {dy, c.inputs[0]})};
      if (c.inputs.size() == 3) dx.push_back(g.add1("fully_connected_grad_bias", {dy}));
      return dx;
    };
    d.cost = [](const void*, std::span<const TensorType> in, std::span<const TensorType> out) {
      const double bias = in.size() == 3 ? static_cast<double>(out[0].numel()) : 0.0;
      return Cost{gemm_flops(in[0].shape[0], in[1].shape[0], in[0].shape[1]) + bias, io_bytes(in, out)};
    };
    d.cpu = fc_cpu;
    d.prepare = prepare_fc;
    d.sample = OpSample{
        {}, {TensorType{DType::f32, {3, 4}}, TensorType{DType::f32, {5, 4}}, TensorType{DType::f32, {5}}}};
    registry.add(std::move(d));
  }
  {
    OpDef d;
    d.name = "fully_connected_grad_data";
    d.doc = "backward of fully_connected: dx[N,D] = dy[N,M] w[M,D]";
    d.min_inputs = d.max_inputs = 2;
    d.infer = infer_grad_data;
    d.cost = [](const void*, std::span<const TensorType> in, std::span<const TensorType> out) {
      return Cost{gemm_flops(in[0].shape[0], in[0].shape[1], in[1].shape[1]), io_bytes(in, out)};
    };
    d.prepare = prepare_grad_data;
    d.cpu = grad_data_cpu;
    d.sample = OpSample{{}, {TensorType{DType::f32, {3, 5}}, TensorType{DType::f32, {5, 4}}}};
    registry.add(std::move(d));
  }
  {
    OpDef d;
    d.name = "fully_connected_grad_weight";
    d.doc = "backward of fully_connected: dw[M,D] = dy[N,M]^T x[N,D] (+ sum[M,D], accumulated in place)";
    d.min_inputs = 2;
    d.max_inputs = 3;
    d.accumulates = 2;
    d.inplace = {{2, 0}};
    d.infer = infer_grad_weight;
    d.cost = [](const void*, std::span<const TensorType> in, std::span<const TensorType> out) {
      const double sum = in.size() == 3 ? static_cast<double>(out[0].numel()) : 0.0;
      return Cost{gemm_flops(in[0].shape[0], in[0].shape[1], in[1].shape[1]) + sum, io_bytes(in, out)};
    };
    d.cpu = grad_weight_cpu;
    // The sample takes the accumulating form (its in-place option is checked on it); the plain form
    // is tested in tests/ops/fully_connected_test.cpp.
    d.sample = OpSample{
        {}, {TensorType{DType::f32, {3, 5}}, TensorType{DType::f32, {3, 4}}, TensorType{DType::f32, {5, 4}}}};
    registry.add(std::move(d));
  }
  {
    OpDef d;
    d.name = "fully_connected_grad_bias";
    d.traits.reduction = true;
    d.doc = "backward of fully_connected: db[M] = sum over n of dy[n,M]";
    d.min_inputs = d.max_inputs = 1;
    d.infer = infer_grad_bias;
    d.cost = [](const void*, std::span<const TensorType> in, std::span<const TensorType> out) {
      return Cost{static_cast<double>(in[0].numel()), io_bytes(in, out)};
    };
    d.cpu = grad_bias_cpu;
    d.sample = OpSample{{}, {TensorType{DType::f32, {3, 5}}}};
    registry.add(std::move(d));
  }
}
