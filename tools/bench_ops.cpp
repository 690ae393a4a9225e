// bench_ops: op throughput through the op registry (what mnemo's executor runs), in float32,
// against a plain Eigen GEMM measured in the same run. Google Benchmark; every benchmark reports
// a GFLOP/s rate, and a summary at the end gives each rate as a ratio to the same-run GEMM rate
// and checks the targets of docs/BENCHMARKS.md.
//   conv2d on CIFAR-ResNet shapes (batch 64, 3x3, stride 1, padding 1; 16 ch at 32x32, 32 at
//   16x16, 64 at 8x8): fwd, bwd_data, bwd_weight, fwd+bwd (fwd + bwd_data + bwd_weight), with the
//   default algorithm (oneDNN direct), with algo=im2col (im2col + Eigen GEMM) and with
//   algo=winograd (oneDNN Winograd, opt-in);
//   raw oneDNN primitives (no mnemo around them) with plain nchw layouts and with blocked layouts
//   (no reorders), to show where the time goes; fully_connected's three passes at LSTM sizes
//   (32 x 512 -> 2048 and 5000, 64 x 1024 -> 4096), through the op and through Eigen, oneDNN's sgemm
//   and matmul primitive and (optional) MKL;
//   channel-blocked activations against plain ones (conv passes with `block`, batch norm);
//   Eigen float32 GEMM 1024^3 (row-major, .noalias()).
// Usage: bench_ops [--threads=N] [Google Benchmark flags, e.g. --benchmark_repetitions=3]
#include <benchmark/benchmark.h>
#include <omp.h>

#include <Eigen/Core>
#include <algorithm>
#include <cstdio>
#include <cstring>
#include <map>
#include <oneapi/dnnl/dnnl.h>
#include <oneapi/dnnl/dnnl.hpp>
#include <random>
#include <string>
#include <vector>

#ifdef MNEMO_BENCH_MKL
#include <mkl_cblas.h>
#endif

#include "core/device.h"
#include "core/graph.h"
#include "core/memory_plan.h"
#include "core/stats.h"
#include "ops/conv2d.h"

namespace {
using namespace mnemo;

constexpr const char* kGflops = "GFLOP/s";

// One registered op on its own: its node (parsed params, inferred outputs), random inputs, outputs
// and its planned workspace, ready to call the CPU kernel the executor would call.
class OpRun {
 public:
  OpRun(const std::string& op, const std::vector<TensorType>& inputs, const Attrs& attrs) {
    std::vector<EntryRef> ins;
    for (size_t i = 0; i < inputs.size(); ++i) ins.push_back(g_.input("x" + std::to_string(i), inputs[i]));
    id_ = g_.add(op, ins, attrs, "op");
    std::mt19937 rng(42);
    std::normal_distribution<float> nd(0.f, 1.f);
    for (const TensorType& t : inputs) {
      in_.emplace_back(t);
      for (int64_t i = 0; i < t.numel(); ++i) in_.back().as<float>()[i] = nd(rng);
    }
    for (const TensorType& t : g_.node(id_).outputs) out_.emplace_back(t);
    kernel_ = mnemo::cpu_device().prepare(g_, id_);  // what the executor runs: the node's prepared state
    ws_bytes_ = kernel_.workspace;
    ws_ = Tensor(DType::f32, {static_cast<int64_t>(ws_bytes_ / 4 + 1)});
    for (const Tensor& t : in_) in_views_.push_back(t.view());
    for (const Tensor& t : out_) out_views_.push_back(t.view());
  }
  void run() const {
    const Node& n = g_.node(id_);
    kernel_.run(KernelContext{in_views_, out_views_, n.params.get(), ws_.data(), ws_bytes_, nullptr, kernel_.state.get()});
  }
  size_t workspace_bytes() const { return ws_bytes_; }
  double flops() const { return node_cost(g_, id_).flops; }

 private:
  Graph g_;
  int id_ = -1;
  PreparedKernel kernel_;
  std::vector<Tensor> in_, out_;
  std::vector<TensorView> in_views_, out_views_;
  Tensor ws_;
  size_t ws_bytes_ = 0;
};

void set_rate(benchmark::State& state, double flops_per_iter) {
  state.counters[kGflops] =
      benchmark::Counter(flops_per_iter * 1e-9 * static_cast<double>(state.iterations()), benchmark::Counter::kIsRate);
}

struct ConvShape {
  int64_t c, hw;
  std::string name() const { return "C" + std::to_string(c) + "_" + std::to_string(hw) + "x" + std::to_string(hw); }
};
constexpr int64_t kBatch = 64;
const std::vector<ConvShape> kConvShapes = {{16, 32}, {32, 16}, {64, 8}};

// The three registered conv passes of one shape (3x3, stride 1, padding 1, K = C).
struct ConvPasses {
  OpRun fwd, data, weight;
  ConvPasses(const ConvShape& s, const std::string& algo)
      : fwd("conv2d", {x(s), w(s)}, attrs(algo)),
        data("conv2d_grad_data", {x(s), w(s)}, with(attrs(algo), "input_hw", {s.hw, s.hw})),
        weight("conv2d_grad_weight", {x(s), x(s)}, with(attrs(algo), "kernel", {3, 3})) {}
  static TensorType x(const ConvShape& s) { return {DType::f32, {kBatch, s.c, s.hw, s.hw}}; }
  static TensorType w(const ConvShape& s) { return {DType::f32, {s.c, s.c, 3, 3}}; }
  static Attrs attrs(const std::string& algo) {
    Attrs a{{"stride", int64_t{1}}, {"padding", int64_t{1}}};
    if (algo != "auto") a["algo"] = algo;
    return a;
  }
  static Attrs with(Attrs a, const std::string& key, std::vector<int64_t> v) {
    a[key] = std::move(v);
    return a;
  }
};

// Planned workspace of each registered conv pass (printed with the summary).
std::vector<std::pair<std::string, size_t>> g_workspaces;

void register_conv(const ConvShape& s, const std::string& algo) {
  const std::string base = (algo == "auto" ? "conv2d/" : "conv2d_" + algo + "/") + s.name() + "/";
  auto passes = std::make_shared<ConvPasses>(s, algo);
  g_workspaces.push_back({base + "fwd", passes->fwd.workspace_bytes()});
  g_workspaces.push_back({base + "bwd_data", passes->data.workspace_bytes()});
  g_workspaces.push_back({base + "bwd_weight", passes->weight.workspace_bytes()});
  auto one = [passes](const OpRun ConvPasses::*pass) {
    return [passes, pass](benchmark::State& state) {
      const OpRun& r = (*passes).*pass;
      for (auto _ : state) r.run();
      set_rate(state, r.flops());
    };
  };
  benchmark::RegisterBenchmark((base + "fwd").c_str(), one(&ConvPasses::fwd))->UseRealTime();
  benchmark::RegisterBenchmark((base + "bwd_data").c_str(), one(&ConvPasses::data))->UseRealTime();
  benchmark::RegisterBenchmark((base + "bwd_weight").c_str(), one(&ConvPasses::weight))->UseRealTime();
  benchmark::RegisterBenchmark((base + "fwd+bwd").c_str(), [passes](benchmark::State& state) {
    for (auto _ : state) {
      passes->fwd.run();
      passes->data.run();
      passes->weight.run();
    }
    set_rate(state, passes->fwd.flops() + passes->data.flops() + passes->weight.flops());
  })->UseRealTime();
}

// Raw oneDNN primitives, forward / backward data / backward weights, either on plain nchw/oihw
// memory or on the blocked layouts oneDNN prefers (inputs already in them: no reorders timed).
void register_raw_onednn(const ConvShape& s, bool blocked) {
  using namespace dnnl;
  using tag = memory::format_tag;
  static engine eng(engine::kind::cpu, 0);
  const std::string base = std::string(blocked ? "onednn_blocked/" : "onednn_nchw/") + s.name() + "/";
  const memory::dims xd{kBatch, s.c, s.hw, s.hw}, wd{s.c, s.c, 3, 3}, st{1, 1}, dil{0, 0}, pad{1, 1};
  const double flops = 2.0 * kBatch * s.c * s.c * 9 * s.hw * s.hw;
  auto md = [&](const memory::dims& d, tag plain) {
    return memory::desc(d, memory::data_type::f32, blocked ? tag::any : plain);
  };
  const auto alg = algorithm::convolution_direct;
  auto fpd = std::make_shared<convolution_forward::primitive_desc>(
      convolution_forward::desc(prop_kind::forward_training, alg, md(xd, tag::nchw), md(wd, tag::oihw),
                                md(xd, tag::nchw), st, dil, pad, pad),
      eng);
  auto dpd = std::make_shared<convolution_backward_data::primitive_desc>(
      convolution_backward_data::desc(alg, md(xd, tag::nchw), md(wd, tag::oihw), md(xd, tag::nchw), st, dil, pad, pad),
      eng, *fpd);
  auto wpd = std::make_shared<convolution_backward_weights::primitive_desc>(
      convolution_backward_weights::desc(alg, md(xd, tag::nchw), md(wd, tag::oihw), md(xd, tag::nchw), st, dil, pad,
                                         pad),
      eng, *fpd);
  // Zero-filled buffers in each primitive's own layouts (values do not change the timing).
  auto mem = [](const memory::desc& d) {
    memory m(d, eng);
    std::memset(m.get_data_handle(), 0, d.get_size());
    return m;
  };
  using Step = std::pair<primitive, std::unordered_map<int, memory>>;
  auto bench = [&](const std::string& name, std::vector<Step> steps) {
    benchmark::RegisterBenchmark((base + name).c_str(), [steps, flops](benchmark::State& state) {
      stream strm(eng);
      for (auto _ : state) {
        for (const auto& [p, args] : steps) p.execute(strm, args);
        strm.wait();
      }
      set_rate(state, flops * static_cast<double>(steps.size()));
    })->UseRealTime();
  };
  const Step fwd{convolution_forward(*fpd),
                 {{DNNL_ARG_SRC, mem(fpd->src_desc())}, {DNNL_ARG_WEIGHTS, mem(fpd->weights_desc())},
                  {DNNL_ARG_DST, mem(fpd->dst_desc())}}};
  const Step data{convolution_backward_data(*dpd),
                  {{DNNL_ARG_DIFF_DST, mem(dpd->diff_dst_desc())}, {DNNL_ARG_WEIGHTS, mem(dpd->weights_desc())},
                   {DNNL_ARG_DIFF_SRC, mem(dpd->diff_src_desc())}}};
  const Step weight{convolution_backward_weights(*wpd),
                    {{DNNL_ARG_DIFF_DST, mem(wpd->diff_dst_desc())}, {DNNL_ARG_SRC, mem(wpd->src_desc())},
                     {DNNL_ARG_DIFF_WEIGHTS, mem(wpd->diff_weights_desc())}}};
  bench("fwd", {fwd});
  bench("bwd_data", {data});
  bench("bwd_weight", {weight});
  bench("fwd+bwd", {fwd, data, weight});
}

// The GEMMs of fully_connected at the LSTM shapes (N rows, D inputs, M outputs): y = x w^T (fwd, with
// bias), dx = dy w (bwd_data), dw = dy^T x (bwd_weight). Each product through the registered op (what
// the executor runs) and through every library at hand, on the same shapes and threads: Eigen,
// oneDNN's sgemm, oneDNN's matmul primitive (transposes as strides, created once), and MKL's
// cblas_sgemm when bench_ops was built with MNEMO_BENCH_MKL (cmake -DMNEMO_MKL_ROOT=...).
// tools/gemm_vs_pytorch.py runs these beside PyTorch's torch.mm in alternating rounds.
struct FcShape {
  int64_t n, d, m;
  std::string name() const { return std::to_string(n) + "x" + std::to_string(d) + "->" + std::to_string(m); }
};
const std::vector<FcShape> kFcShapes = {{32, 512, 2048}, {32, 512, 5000}, {64, 1024, 4096}};

// Row-major C[M,N] = op(A) op(B), A stored [K,M] when ta, B stored [N,K] when tb.
struct Gemm {
  bool ta, tb;
  int64_t M, N, K;
};

void register_gemm_libraries(const std::string& base, const Gemm& g) {
  using Mat = Eigen::Matrix<float, Eigen::Dynamic, Eigen::Dynamic, Eigen::RowMajor>;
  struct Buffers {
    Mat a, b, c;
  };
  auto buf = std::make_shared<Buffers>(Buffers{g.ta ? Mat::Random(g.K, g.M) : Mat::Random(g.M, g.K),
                                               g.tb ? Mat::Random(g.N, g.K) : Mat::Random(g.K, g.N), Mat(g.M, g.N)});
  const double flops = 2.0 * g.M * g.N * g.K;
  const int64_t lda = g.ta ? g.M : g.K, ldb = g.tb ? g.K : g.N;
  benchmark::RegisterBenchmark((base + "/eigen").c_str(), [=](benchmark::State& state) {
    for (auto _ : state) {
      Mat& c = buf->c;
      if (g.ta && g.tb) c.noalias() = buf->a.transpose() * buf->b.transpose();
      else if (g.ta) c.noalias() = buf->a.transpose() * buf->b;
      else if (g.tb) c.noalias() = buf->a * buf->b.transpose();
      else c.noalias() = buf->a * buf->b;
      benchmark::DoNotOptimize(buf->c.data());
    }
    set_rate(state, flops);
  })->UseRealTime();
  benchmark::RegisterBenchmark((base + "/onednn_sgemm").c_str(), [=](benchmark::State& state) {
    for (auto _ : state)
      dnnl_sgemm(g.ta ? 'T' : 'N', g.tb ? 'T' : 'N', g.M, g.N, g.K, 1.f, buf->a.data(), lda, buf->b.data(), ldb, 0.f,
                 buf->c.data(), g.N);
    set_rate(state, flops);
  })->UseRealTime();
  benchmark::RegisterBenchmark((base + "/onednn_matmul").c_str(), [=](benchmark::State& state) {
    using md = dnnl::memory::desc;
    using dt = dnnl::memory::data_type;
    const dnnl::engine eng(dnnl::engine::kind::cpu, 0);
    dnnl::stream strm(eng);
    const md a({g.M, g.K}, dt::f32, g.ta ? dnnl::memory::dims{1, g.M} : dnnl::memory::dims{g.K, 1});
    const md b({g.K, g.N}, dt::f32, g.tb ? dnnl::memory::dims{1, g.K} : dnnl::memory::dims{g.N, 1});
    const md c({g.M, g.N}, dt::f32, dnnl::memory::dims{g.N, 1});
    const dnnl::matmul mm(dnnl::matmul::primitive_desc(dnnl::matmul::desc(a, b, c), eng));
    dnnl::memory am(a, eng, buf->a.data()), bm(b, eng, buf->b.data()), cm(c, eng, buf->c.data());
    for (auto _ : state) mm.execute(strm, {{DNNL_ARG_SRC, am}, {DNNL_ARG_WEIGHTS, bm}, {DNNL_ARG_DST, cm}});
    set_rate(state, flops);
  })->UseRealTime();
#ifdef MNEMO_BENCH_MKL
  benchmark::RegisterBenchmark((base + "/mkl").c_str(), [=](benchmark::State& state) {
    for (auto _ : state)
      cblas_sgemm(CblasRowMajor, g.ta ? CblasTrans : CblasNoTrans, g.tb ? CblasTrans : CblasNoTrans, g.M, g.N, g.K,
                  1.f, buf->a.data(), lda, buf->b.data(), ldb, 0.f, buf->c.data(), g.N);
    set_rate(state, flops);
  })->UseRealTime();
#endif
}

void register_fully_connected(const FcShape& s) {
  const TensorType x{DType::f32, {s.n, s.d}}, w{DType::f32, {s.m, s.d}}, b{DType::f32, {s.m}},
      dy{DType::f32, {s.n, s.m}};
  struct Pass {
    const char* name;
    const char* op;
    std::vector<TensorType> in;
    Gemm gemm;
  };
  const Pass passes[] = {{"fwd", "fully_connected", {x, w, b}, {false, true, s.n, s.m, s.d}},
                         {"bwd_data", "fully_connected_grad_data", {dy, w}, {false, false, s.n, s.d, s.m}},
                         {"bwd_weight", "fully_connected_grad_weight", {dy, x}, {true, false, s.m, s.d, s.n}}};
  for (const Pass& p : passes) {
    const std::string base = "fc/" + s.name() + "/" + p.name;
    auto r = std::make_shared<OpRun>(p.op, p.in, Attrs{});
    benchmark::RegisterBenchmark((base + "/op").c_str(), [r](benchmark::State& state) {
      for (auto _ : state) r->run();
      set_rate(state, r->flops());
    })->UseRealTime();
    register_gemm_libraries(base, p.gemm);
  }
}

// Channel-blocked activations (ops/layout.cpp) against plain ones on the CIFAR shapes: the conv
// passes with `block` (no reorders around oneDNN) and batch norm's forward and backward, each
// beside the plain op (same rate unit: the op's cost-model FLOPs per second).
void register_layout(const ConvShape& s) {
  const int64_t b = ops::conv::onednn_channel_block();
  if (!b) return;
  const TensorType xp{DType::f32, {kBatch, s.c, s.hw, s.hw}}, xb{DType::f32, {kBatch, s.c / b, s.hw, s.hw, b}};
  const TensorType c{DType::f32, {s.c}}, w{DType::f32, {s.c, s.c, 3, 3}};
  for (const bool blocked : {false, true}) {
    const TensorType& x = blocked ? xb : xp;
    const std::string base = "layout/" + s.name() + (blocked ? "/blocked" + std::to_string(b) : "/plain");
    Attrs a{{"padding", int64_t{1}}};
    if (blocked) a["block"] = b;
    Attrs ad = a, aw = a, bn = blocked ? Attrs{{"block", b}} : Attrs{};
    ad["input_hw"] = std::vector<int64_t>{s.hw, s.hw};
    aw["kernel"] = std::vector<int64_t>{3, 3};
    const std::vector<std::pair<std::string, std::shared_ptr<OpRun>>> runs = {
        {"conv_fwd", std::make_shared<OpRun>("conv2d", std::vector<TensorType>{x, w}, a)},
        {"conv_bwd_data", std::make_shared<OpRun>("conv2d_grad_data", std::vector<TensorType>{x, w}, ad)},
        {"conv_bwd_weight", std::make_shared<OpRun>("conv2d_grad_weight", std::vector<TensorType>{x, x}, aw)},
        {"bn_fwd", std::make_shared<OpRun>("batch_norm", std::vector<TensorType>{x, c, c}, bn)},
        {"bn_bwd", std::make_shared<OpRun>("batch_norm_grad", std::vector<TensorType>{x, c, c, c, x}, bn)}};
    for (const auto& [name, r] : runs)
      benchmark::RegisterBenchmark((base + "/" + name).c_str(), [r](benchmark::State& state) {
        for (auto _ : state) r->run();
        set_rate(state, r->flops());
      })->UseRealTime();
  }
}

const char* kGemmName = "eigen_gemm/1024x1024x1024";
void register_gemm() {
  benchmark::RegisterBenchmark(kGemmName, [](benchmark::State& state) {
    using Mat = Eigen::Matrix<float, Eigen::Dynamic, Eigen::Dynamic, Eigen::RowMajor>;
    const int64_t n = 1024;
    Mat a = Mat::Random(n, n), b = Mat::Random(n, n), c(n, n);
    for (auto _ : state) {
      c.noalias() = a * b;
      benchmark::DoNotOptimize(c.data());
    }
    set_rate(state, 2.0 * n * n * n);
  })->UseRealTime();
}

// Console output as usual, plus the GFLOP/s of every iteration run kept for the summary.
class SummaryReporter : public benchmark::ConsoleReporter {
 public:
  void ReportRuns(const std::vector<Run>& runs) override {
    ConsoleReporter::ReportRuns(runs);
    for (const Run& r : runs) {
      if (r.run_type != Run::RT_Iteration || r.error_occurred) continue;
      auto it = r.counters.find(kGflops);
      if (it == r.counters.end()) continue;
      const std::string name = r.run_name.function_name;
      if (!rates_.count(name)) order_.push_back(name);
      rates_[name].push_back(it->second.value);
    }
  }
  double median(const std::string& name) const {
    auto it = rates_.find(name);
    if (it == rates_.end()) return 0;
    return mnemo::median(it->second);
  }
  void print_summary() const {
    const double gemm = median(kGemmName);
    std::printf("\nSummary: median GFLOP/s over %zu repetition(s), ratio to the same-run Eigen GEMM (%.1f GFLOP/s), "
                "%d thread(s)\n\n",
                rates_.empty() ? size_t{0} : rates_.begin()->second.size(), gemm, omp_get_max_threads());
    std::printf("| benchmark | GFLOP/s | ratio to GEMM |\n|---|---:|---:|\n");
    for (const std::string& name : order_)
      std::printf("| %s | %.1f | %.2f |\n", name.c_str(), median(name), gemm > 0 ? median(name) / gemm : 0.0);
    std::printf("\nPlanned workspace per pass (MiB):\n");
    for (const auto& [name, bytes] : g_workspaces) std::printf("  %-36s %7.2f\n", name.c_str(), bytes / 1048576.0);
    std::printf("\nTargets (conv2d fwd+bwd, ratio to GEMM):\n");
    const std::pair<const char*, double> targets[] = {
        {"conv2d/C16_32x32/fwd+bwd", 0.5}, {"conv2d/C32_16x16/fwd+bwd", 1.2}, {"conv2d/C64_8x8/fwd+bwd", 1.2}};
    for (const auto& [name, target] : targets) {
      if (!rates_.count(name) || gemm <= 0) {
        std::printf("  %-28s not run\n", name);
        continue;
      }
      const double ratio = median(name) / gemm;
      std::printf("  %-28s %.2fx (target >= %.1fx): %s\n", name, ratio, target, ratio >= target ? "met" : "MISSED");
    }
  }

 private:
  std::map<std::string, std::vector<double>> rates_;
  std::vector<std::string> order_;
};

}  // namespace

int main(int argc, char** argv) {
  // --threads=N (ours) is taken out before Google Benchmark parses the rest.
  int kept = 1;
  for (int i = 1; i < argc; ++i) {
    if (std::strncmp(argv[i], "--threads=", 10) == 0) {
      const int t = std::atoi(argv[i] + 10);
      if (t < 1) {
        std::fprintf(stderr, "bench_ops: --threads must be >= 1, got '%s'\n", argv[i] + 10);
        return 2;
      }
      omp_set_num_threads(t);
    } else {
      argv[kept++] = argv[i];
    }
  }
  argc = kept;
  benchmark::Initialize(&argc, argv);
  if (benchmark::ReportUnrecognizedArguments(argc, argv)) return 2;
  benchmark::AddCustomContext("omp_threads", std::to_string(omp_get_max_threads()));

  register_gemm();
  for (const ConvShape& s : kConvShapes) register_conv(s, "auto");
  for (const FcShape& s : kFcShapes) register_fully_connected(s);
  for (const ConvShape& s : kConvShapes) register_conv(s, "im2col");
  for (const ConvShape& s : kConvShapes) register_conv(s, "winograd");
  for (const ConvShape& s : kConvShapes) register_raw_onednn(s, false);
  for (const ConvShape& s : kConvShapes) register_raw_onednn(s, true);
  for (const ConvShape& s : kConvShapes) register_layout(s);
  register_gemm();  // again at the end: the summary uses the median of both, so drift shows up in both

  SummaryReporter reporter;
  benchmark::RunSpecifiedBenchmarks(&reporter);
  reporter.print_summary();
  benchmark::Shutdown();
  return 0;
}
