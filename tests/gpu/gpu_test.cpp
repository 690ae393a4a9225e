// GPU tests (ctest label `gpu`): the CUDA backend against the CPU backend. Every test skips with
// the runtime's reason when the machine has no usable CUDA device, so the binary builds and
// "passes" (all skipped) on CI; on a GPU machine run `ctest -L gpu` (scripts/gpu-run.sh does).
//   per op:   CUDA kernel vs CPU kernel on the op's sample (float32), outputs poisoned with NaN
//             first (every element written), run twice (bitwise deterministic), in-place options;
//   per mode: loss and every gradient bitwise identical across memory modes on the GPU;
//   memory:   the executor allocates exactly the planned arena; the cudaMemGetInfo peak minus the
//             memory in use at open matches the planned total within the libraries' own use;
//   training: a few steps on the GPU track the CPU run.
#include <algorithm>
#include <chrono>
#include <climits>
#include <cmath>
#include <condition_variable>
#include <cstring>
#include <mutex>

#include <cuda_runtime_api.h>

#include "core/comm.h"
#include "cuda/context.h"
#ifdef MNEMO_HAVE_NCCL
#include "cuda/nccl.h"
#endif
#include "train/parallel/run_comm.h"
#include "train/session/sgd.h"
#include "cuda/device.h"
#include "cuda/kernels/util.h"
#include "test_util.h"
#include "train/session/device_state.h"
#include "train/session/param_store.h"
#include "train/session/pipeline.h"
#include "train/session/safetensors.h"
#include "train/session/session.h"

namespace mnemo::test {
namespace {

#define MNEMO_REQUIRE_GPU()                                                          \
  do {                                                                               \
    std::string why_;                                                                \
    if (cuda::device_count(&why_) == 0) GTEST_SKIP() << "no CUDA device: " << why_;  \
  } while (0)

// One device for the whole binary, deliberately never destroyed: destroying cuDNN/cuBLAS handles
// from a static destructor can run after the CUDA runtime's own teardown.
Device& gpu() {
  static Device* d = cuda::open_device(0).release();
  return *d;
}

// Device memory for one tensor, freed at the end of scope.
struct DeviceTensor {
  Device* d;
  TensorView v;
  DeviceTensor(Device& dev, const TensorType& t) : d(&dev), v{dev.allocate(std::max<int64_t>(1, t.bytes()), "a test tensor"), t} {}
  ~DeviceTensor() { d->release(v.data); }
  DeviceTensor(const DeviceTensor&) = delete;
  DeviceTensor(DeviceTensor&& o) noexcept : d(o.d), v(o.v) { o.v.data = nullptr; }
  void upload(const Tensor& t) { d->copy(v.data, t.data(), static_cast<int64_t>(t.bytes()), CopyKind::host_to_device); }
  Tensor download() const {
    Tensor t(v.type);
    d->copy(t.data(), v.data, static_cast<int64_t>(t.bytes()), CopyKind::device_to_host);
    return t;
  }
  void poison() {
    if (v.dtype() == DType::f32) cuda::fill(static_cast<cuda::Context*>(d->kernel_context())->stream, v.as<float>(), v.numel(), NAN);
  }
};

struct Sample {
  Graph g;
  int node = -1;
  std::vector<Tensor> values;
};

Sample make_sample(const std::string& op, const OpSample& sample, uint64_t seed) {
  Sample s;
  std::vector<EntryRef> in;
  for (size_t i = 0; i < sample.inputs.size(); ++i) {
    const TensorType& t = sample.inputs[i];
    in.push_back(s.g.input("x" + std::to_string(i), t));
    Tensor v(t);
    if (is_float(t.dtype)) fill_distinct(v, seed + i);
    else fill_ints(v, seed + i, sample.int_high);
    s.values.push_back(std::move(v));
  }
  s.node = s.g.add(op, in, sample.attrs, "op");
  return s;
}
Sample make_sample(const OpDef& d, uint64_t seed) { return make_sample(d.name, *d.sample, seed); }

// Runs node s.node's CUDA kernel; `alias`: output j written into input i's buffer.
std::vector<Tensor> run_on_gpu(const Sample& s, std::optional<InplaceOption> alias = std::nullopt) {
  Device& dev = gpu();
  const Node& n = s.g.node(s.node);
  std::vector<DeviceTensor> in, out;
  for (const Tensor& v : s.values) in.emplace_back(dev, v.type()), in.back().upload(v);
  for (const TensorType& t : n.outputs) out.emplace_back(dev, t), out.back().poison();
  std::vector<TensorView> iv, ov;
  for (auto& t : in) iv.push_back(t.v);
  for (auto& t : out) ov.push_back(t.v);
  if (alias) ov[alias->output] = iv[alias->input];
  const PreparedKernel k = dev.prepare(s.g, s.node);
  const size_t ws = k.workspace;
  DeviceTensor work(dev, TensorType{DType::f32, {static_cast<int64_t>(ws / 4 + 1)}});
  k.run(KernelContext{iv, ov, n.params.get(), ws ? work.v.data : nullptr, ws, dev.kernel_context(), k.state.get()});
  dev.synchronize();
  std::vector<Tensor> res;
  for (size_t j = 0; j < ov.size(); ++j) {
    Tensor t(n.outputs[j]);
    dev.copy(t.data(), ov[j].data, static_cast<int64_t>(t.bytes()), CopyKind::device_to_host);
    res.push_back(std::move(t));
  }
  return res;
}

std::vector<std::string> compute_ops() {
  std::vector<std::string> v;
  for (const OpDef* d : op_registry().all())
    if (d->kind == OpKind::compute && d->sample && d->backends.cuda) v.push_back(d->name);  // (to_blocked, to_plain: CPU only)
  return v;
}

class GpuOp : public ::testing::TestWithParam<std::string> {};

TEST_P(GpuOp, MatchesCpuWritesEverythingAndIsDeterministic) {
  MNEMO_REQUIRE_GPU();
  const OpDef& d = op_registry().get(GetParam());
  for (uint64_t seed : {3u, 101u}) {
    const Sample s = make_sample(d, seed);
    std::vector<std::pair<std::string, const Tensor*>> bind;
    for (size_t i = 0; i < s.values.size(); ++i) bind.push_back({"x" + std::to_string(i), &s.values[i]});
    std::vector<EntryRef> outs;
    for (size_t j = 0; j < s.g.node(s.node).outputs.size(); ++j) outs.push_back({s.node, static_cast<int>(j)});
    const std::vector<Tensor> cpu = run_graph(s.g, bind, outs);
    const std::vector<Tensor> a = run_on_gpu(s), b = run_on_gpu(s);
    for (size_t j = 0; j < cpu.size(); ++j) {
      if (cpu[j].dtype() == DType::f32) {
        for (int64_t i = 0; i < a[j].numel(); ++i) {
          ASSERT_FALSE(std::isnan(a[j].as<float>()[i]) && !std::isnan(cpu[j].as<float>()[i]))
              << d.name << " output " << j << " element " << i << " not written";
        }
      }
      EXPECT_LE(max_rel_diff(a[j], cpu[j]), 2e-5) << d.name << " output " << j << " vs the CPU kernel (seed " << seed << ")";
      EXPECT_TRUE(bitwise_equal(a[j], b[j])) << d.name << " output " << j << " differs between two runs";
    }
    for (const InplaceOption& o : d.inplace) {
      const std::vector<Tensor> c = run_on_gpu(s, o);
      EXPECT_TRUE(bitwise_equal(c[o.output], a[o.output])) << d.name << " in place " << o.input << "->" << o.output;
    }
  }
}

// The three passes of a convolution of x by w with attributes `a` (a bias of K channels in the
// forward one with `bias`): y's type and each pass's op and sample.
struct ConvPasses {
  TensorType y;
  std::vector<std::pair<std::string, OpSample>> runs;
};
ConvPasses conv_passes(const TensorType& x, const TensorType& w, const Attrs& a, bool bias = false) {
  Graph probe;
  ConvPasses p;
  p.y = probe.type(probe.add1("conv2d", {probe.input("x", x), probe.input("w", w)}, a));
  Attrs ad = a, aw = a;
  ad["input_hw"] = std::vector<int64_t>{x.shape[2], x.shape[3]};
  aw["kernel"] = std::vector<int64_t>{w.shape[2], w.shape[3]};
  std::vector<TensorType> forward_in = {x, w};
  if (bias) forward_in.push_back(TensorType{DType::f32, {w.shape[0]}});
  p.runs = {{"conv2d", OpSample{a, forward_in}}, {"conv2d_grad_data", OpSample{ad, {p.y, w}}},
            {"conv2d_grad_weight", OpSample{aw, {p.y, x}}}};
  return p;
}

// Output 0 of the sample's node, run on the CPU.
Tensor cpu_output(const Sample& s) {
  std::vector<std::pair<std::string, const Tensor*>> bind;
  for (size_t i = 0; i < s.values.size(); ++i) bind.push_back({"x" + std::to_string(i), &s.values[i]});
  return std::move(run_graph(s.g, bind, {{s.node, 0}})[0]);
}

// Depthwise convolutions (cuDNN's grouped path with G = C) and a grouped 1x7 kernel, every pass,
// against the CPU kernels; the registry's samples cover G = 2.
TEST(GpuConv, DepthwiseAndGroupedMatchCpu) {
  MNEMO_REQUIRE_GPU();
  auto f32 = [](Shape s) { return TensorType{DType::f32, std::move(s)}; };
  struct Case { Shape x, w; Attrs a; };
  const Case cases[] = {
      {{2, 16, 9, 9}, {16, 1, 3, 3}, {{"stride", int64_t{2}}, {"padding", int64_t{1}}, {"groups", int64_t{16}}}},
      {{2, 8, 7, 7}, {16, 1, 3, 3}, {{"padding", int64_t{1}}, {"groups", int64_t{8}}}},
      {{2, 6, 8, 7}, {6, 2, 1, 7}, {{"padding", std::vector<int64_t>{0, 3}}, {"groups", int64_t{3}}}},
  };
  for (const Case& c : cases) {
    const TensorType x = f32(c.x), w = f32(c.w);
    for (const auto& [op, sample] : conv_passes(x, w, c.a).runs) {
      const Sample s = make_sample(op, sample, 7);
      const Tensor cpu = cpu_output(s);
      const std::vector<Tensor> a = run_on_gpu(s), b = run_on_gpu(s);
      EXPECT_LE(max_rel_diff(a[0], cpu), 2e-5) << op << " x " << x.str() << " w " << w.str();
      EXPECT_TRUE(bitwise_equal(a[0], b[0])) << op << " differs between two runs";
    }
  }
}

cuda::Context& gpu_context() { return *static_cast<cuda::Context*>(gpu().kernel_context()); }

// Lowers the elements one cuDNN convolution launch may hold for the scope (the plans are cached by
// the limit too, so plans made inside are split and plans made outside are not).
struct LaunchLimit {
  int64_t saved;
  explicit LaunchLimit(int64_t limit) : saved(gpu_context().conv_launch_elements) { gpu_context().conv_launch_elements = limit; }
  ~LaunchLimit() { gpu_context().conv_launch_elements = saved; }
};

// A convolution whose x or y holds more elements than one launch may is run as launches along the
// batch (a limit lowered to two or three samples here: launches of 2, 2, 1 and of 3, 3, 1 samples,
// a bias, a stride and a grouped case); every pass against the CPU kernel, written everywhere
// (NaN-poisoned outputs), deterministic.
TEST(GpuConv, BatchSplitLaunchesMatchCpu) {
  MNEMO_REQUIRE_GPU();
  auto f32 = [](Shape s) { return TensorType{DType::f32, std::move(s)}; };
  struct Case { Shape x, w; Attrs a; bool bias; int per_launch; };
  const Case cases[] = {
      {{5, 3, 9, 9}, {4, 3, 3, 3}, {{"padding", int64_t{1}}}, true, 2},
      {{7, 4, 10, 8}, {6, 4, 3, 3}, {{"stride", int64_t{2}}, {"padding", int64_t{1}}}, false, 3},
      {{5, 6, 8, 7}, {6, 2, 1, 7}, {{"padding", std::vector<int64_t>{0, 3}}, {"groups", int64_t{3}}}, false, 2},
  };
  for (const Case& c : cases) {
    const TensorType x = f32(c.x), w = f32(c.w);
    const ConvPasses passes = conv_passes(x, w, c.a, c.bias);
    const int64_t per = std::max(x.numel(), passes.y.numel()) / x.shape[0];
    const LaunchLimit limit(per * c.per_launch + per / 2);  // c.per_launch samples, not one more
    for (const auto& [op, sample] : passes.runs) {
      const Sample s = make_sample(op, sample, 11);
      const Tensor cpu = cpu_output(s);
      EXPECT_EQ(cuda::conv_launches(gpu().prepare(s.g, s.node).state.get()), 3) << op << " x " << x.str();
      const std::vector<Tensor> a = run_on_gpu(s), again = run_on_gpu(s);
      for (int64_t i = 0; i < a[0].numel(); ++i)
        ASSERT_FALSE(std::isnan(a[0].as<float>()[i])) << op << " x " << x.str() << ": element " << i << " not written";
      EXPECT_LE(max_rel_diff(a[0], cpu), 2e-5) << op << " x " << x.str() << " w " << w.str() << " in launches of "
                                                 << c.per_launch << " samples";
      EXPECT_TRUE(bitwise_equal(a[0], again[0])) << op << " differs between two runs";
    }
  }
}

// Past the int range for real: x and y of [524589, 1, 64, 64] (2 148 716 544 elements each, 8.6 GB;
// test_util.h's BigConv) with a 3x3 kernel, so every pass runs as two launches (262 295 and 262 294
// samples). The forward and the data gradient are checked on the samples at both ends of each
// launch and everything is checked written; the weight gradient, a sum over the whole batch,
// against a float64 sum on the host. The data are zero-mean (a float32 sum of a billion terms of
// one sign would stall, whoever split it), x scaled by 1 + n/N along the batch; a launch reading
// another launch's samples, or overwriting instead of adding to the first launch's sum, moves the
// sum by about its spread, 50 times the tolerance.
TEST(GpuConv, BatchPastTheIntRangeRunsAsLaunches) {
  MNEMO_REQUIRE_GPU();
  using B = BigConv;
  const int64_t elems = B::N * B::S;
  ASSERT_GT(elems, int64_t{INT_MAX});
  size_t free_bytes = 0, total_bytes = 0;
  ASSERT_EQ(cudaMemGetInfo(&free_bytes, &total_bytes), cudaSuccess);
  if (free_bytes < size_t{30} << 30) GTEST_SKIP() << "needs 30 GB of free device memory, " << (free_bytes >> 20) << " MiB free";
  Device& dev = gpu();
  const TensorType big{DType::f32, {B::N, 1, B::H, B::W}}, wt{DType::f32, {1, 1, 3, 3}};
  const Attrs attrs{{"padding", int64_t{1}}};
  auto upload = [&](DeviceTensor& t, float (*value)(int64_t)) {  // in pieces of 64 Mi elements
    std::vector<float> host(int64_t{1} << 26);
    for (int64_t off = 0; off < elems; off += static_cast<int64_t>(host.size())) {
      const int64_t n = std::min<int64_t>(static_cast<int64_t>(host.size()), elems - off);
#pragma omp parallel for
      for (int64_t i = 0; i < n; ++i) host[i] = value(off + i);
      dev.copy(static_cast<float*>(t.v.data) + off, host.data(), n * 4, CopyKind::host_to_device);
    }
  };
  auto all_written = [&](const DeviceTensor& t) {
    std::vector<float> host(int64_t{1} << 26);
    for (int64_t off = 0; off < elems; off += static_cast<int64_t>(host.size())) {
      const int64_t n = std::min<int64_t>(static_cast<int64_t>(host.size()), elems - off);
      dev.copy(host.data(), static_cast<const float*>(t.v.data) + off, n * 4, CopyKind::device_to_host);
      for (int64_t i = 0; i < n; ++i)
        if (std::isnan(host[i])) return off + i;
    }
    return int64_t{-1};
  };
  auto sample_of = [&](const DeviceTensor& t, int64_t n) {
    std::vector<float> host(B::S);
    dev.copy(host.data(), static_cast<const float*>(t.v.data) + n * B::S, B::S * 4, CopyKind::device_to_host);
    return host;
  };
  Tensor w(wt);
  fill_distinct(w, 5);
  DeviceTensor dw_in(dev, wt);
  dw_in.upload(w);
  // Runs `op` on the device tensors (outputs poisoned first).
  auto run = [&](const std::string& op, const Attrs& a, std::vector<TensorView> in, TensorView out, const TensorType& out_type) {
    Graph g;
    std::vector<EntryRef> refs;
    for (size_t i = 0; i < in.size(); ++i) refs.push_back(g.input("x" + std::to_string(i), in[i].type));
    const int node = g.add(op, refs, a, "op");
    EXPECT_EQ(g.node(node).outputs[0], out_type);
    const PreparedKernel k = dev.prepare(g, node);
    EXPECT_EQ(cuda::conv_launches(k.state.get()), 2) << op;
    DeviceTensor work(dev, TensorType{DType::f32, {static_cast<int64_t>(k.workspace / 4 + 1)}});
    std::vector<TensorView> ov = {out};
    k.run(KernelContext{in, ov, g.node(node).params.get(), k.workspace ? work.v.data : nullptr, k.workspace,
                        dev.kernel_context(), k.state.get()});
    dev.synchronize();
  };
  const int64_t chunk = (B::N + 1) / 2;
  const int64_t checked[] = {0, 1, chunk - 1, chunk, chunk + 1, B::N - 1};
  DeviceTensor x(dev, big), y(dev, big);
  upload(x, B::x_at);
  {  // forward: y = conv(x, w)
    y.poison();
    run("conv2d", attrs, {x.v, dw_in.v}, y.v, big);
    EXPECT_EQ(all_written(y), -1) << "conv2d: the first element left NaN";
    for (int64_t n : checked)
      EXPECT_LE(B::sample_error(sample_of(y, n).data(), n, w.as<float>(), false), 1e-5)
          << "conv2d: sample " << n << " of " << B::N << " (launches of " << chunk << ")";
  }
  upload(y, B::dy_at);  // now dy
  {  // weight gradient: dw = sum over the batch of dy (x) x
    DeviceTensor dw(dev, wt);
    dw.poison();
    run("conv2d_grad_weight", Attrs{{"padding", int64_t{1}}, {"kernel", std::vector<int64_t>{3, 3}}}, {y.v, x.v}, dw.v, wt);
    const Tensor got = dw.download();
    double ref[9], spread[9];
    B::weight_grad(ref, spread);
    for (int k = 0; k < 9; ++k)
      EXPECT_LE(std::abs(got.as<float>()[k] - ref[k]), 0.02 * spread[k])
          << "conv2d_grad_weight tap " << k << ": " << got.as<float>()[k] << " vs float64 " << ref[k] << ", spread " << spread[k];
  }
  {  // data gradient: dx = conv_transpose(dy, w), into x's buffer
    x.poison();
    run("conv2d_grad_data", Attrs{{"padding", int64_t{1}}, {"input_hw", std::vector<int64_t>{B::H, B::W}}}, {y.v, dw_in.v}, x.v,
        big);
    EXPECT_EQ(all_written(x), -1) << "conv2d_grad_data: the first element left NaN";
    for (int64_t n : checked)
      EXPECT_LE(B::sample_error(sample_of(x, n).data(), n, w.as<float>(), true), 1e-5)
          << "conv2d_grad_data: sample " << n << " of " << B::N;
  }
}

INSTANTIATE_TEST_SUITE_P(AllComputeOps, GpuOp, ::testing::ValuesIn(compute_ops()), [](const auto& info) { return info.param; });

// One training step's loss and gradients on the GPU under `mode`.
struct StepResult {
  Tensor loss;
  std::vector<Tensor> grads;
  int64_t arena = 0, allocated_arena = 0, total = 0, measured = 0, mnemo_allocated = 0;
  int captures = 0;
};

// `runs` > 1 with `capture`: the later runs replay the captured step (Executor::set_capture).
StepResult gpu_step(const std::string& cfg_text, const std::string& mode, bool capture = false, int runs = 1) {
  TempDir d;
  const Config c = load_config(d.file("c.yaml", cfg_text));
  const DataShape ds = static_data_shape(c);
  const Pipeline p = build_pipeline(c, ds, c.data.batch);
  ParamStore params(p.model.builder.graph(), p.model.builder.params(), c.run.seed);
  Device& dev = gpu();
  const MirrorResult mr = plan_pipeline(c, p, mode, &dev, false);  // gradients as outputs, no update
  const int64_t before = dev.allocated_bytes();
  StepResult r;
  {
    DeviceParams dp(dev, params, nullptr);
    const int64_t before_arena = dev.allocated_bytes();
    Executor ex(mr.training.graph, mr.planned.plan, &dev);
    r.allocated_arena = dev.allocated_bytes() - before_arena;
    r.arena = mr.planned.plan.arena_bytes;
    dp.bind(ex);
    const Graph& g = mr.training.graph;
    Tensor x(g.node(g.find(p.model.data)).outputs[0]), y(g.node(g.find(p.model.labels)).outputs[0]);
    fill_normal(x, 7);
    fill_ints(y, 8, ds.classes);
    DeviceTensor dx(dev, x.type()), dy(dev, y.type());
    dx.upload(x);
    dy.upload(y);
    ex.bind(p.model.data, dx.v);
    ex.bind(p.model.labels, dy.v);
    ex.set_capture(capture);
    for (int i = 0; i < runs; ++i) ex.run();
    dev.synchronize();
    r.captures = ex.captures();
    r.measured = dev.memory_in_use() - dev.memory_at_open();
    r.mnemo_allocated = dev.allocated_bytes() - before;
    r.loss = ex.fetch(mr.training.loss);
    for (const ParamGrad& pg : mr.training.grads) r.grads.push_back(ex.fetch(pg.grad));
  }
  r.total = mr.planned.report.total_bytes;  // no optimiser here
  return r;
}

const char* kResnet =
    "model: {type: resnet, style: cifar, depth: 20, width: 8, layout: plain}\n"
    "data: {source: synthetic, shape: [3, 16, 16], classes: 10, batch: 16}\n"
    "train: {steps: 1, seed: 5}\n";
const char* kLstm =
    "model: {type: lstm, layers: 2, hidden: 32, per_step: true, head: ops}\n"
    "data: {source: synthetic-seq, shape: [12, 16], classes: 20, batch: 8}\n"
    "train: {steps: 1, seed: 5}\n";
// The same LSTM with the fused head (one linear_cross_entropy node, model.head: fused).
const char* kLstmFused =
    "model: {type: lstm, layers: 2, hidden: 32, per_step: true, head: fused}\n"
    "data: {source: synthetic-seq, shape: [12, 16], classes: 20, batch: 8}\n"
    "train: {steps: 1, seed: 5}\n";

// Every memory mode and a budget between `share` and the least total (on the test ResNet, a
// filled member with drop-bn-relu's nodes dropped is chosen; the LSTM's recomputes 18%).
std::vector<std::string> modes_for(const char* cfg) {
  std::vector<std::string> modes = all_memory_modes();
  modes.push_back(cfg == kResnet ? "budget=0.6x" : "budget=0.8x");
  return modes;
}

TEST(GpuModes, LossAndGradientsBitwiseIdenticalAcrossModes) {
  MNEMO_REQUIRE_GPU();
  for (const char* cfg : {kResnet, kLstm, kLstmFused}) {
    const StepResult ref = gpu_step(cfg, "share");
    for (const std::string& mode : modes_for(cfg)) {
      const StepResult r = gpu_step(cfg, mode);
      EXPECT_TRUE(bitwise_equal(r.loss, ref.loss)) << mode;
      ASSERT_EQ(r.grads.size(), ref.grads.size());
      for (size_t k = 0; k < r.grads.size(); ++k) EXPECT_TRUE(bitwise_equal(r.grads[k], ref.grads[k])) << mode << " grad " << k;
    }
  }
}

// The fused head on the GPU (linear_cross_entropy's and stack_rows' kernels in a whole step) gives
// the per-step classifiers' loss and gradients to rounding: the same parameters and batch.
TEST(GpuFusedHead, MatchesThePerStepClassifiers) {
  MNEMO_REQUIRE_GPU();
  const StepResult per_step = gpu_step(kLstm, "share"), fused = gpu_step(kLstmFused, "share");
  EXPECT_LE(max_rel_diff(per_step.loss, fused.loss), 1e-5);
  ASSERT_EQ(per_step.grads.size(), fused.grads.size());
  for (size_t k = 0; k < fused.grads.size(); ++k) EXPECT_LE(norm_rel_diff(fused.grads[k], per_step.grads[k]), 1e-4) << "grad " << k;
}

// The step replayed from a CUDA graph computes the same bits as launching node by node.
TEST(GpuModes, CapturedStepEqualsEagerBitwise) {
  MNEMO_REQUIRE_GPU();
  for (const char* cfg : {kResnet, kLstm}) {
    const StepResult eager = gpu_step(cfg, "sublinear");
    const StepResult replayed = gpu_step(cfg, "sublinear", true, 3);
    EXPECT_EQ(replayed.captures, 1) << "the first run is eager, the second captured, the third replayed";
    EXPECT_TRUE(bitwise_equal(replayed.loss, eager.loss));
    ASSERT_EQ(replayed.grads.size(), eager.grads.size());
    for (size_t k = 0; k < eager.grads.size(); ++k) EXPECT_TRUE(bitwise_equal(replayed.grads[k], eager.grads[k])) << "grad " << k;
  }
}

TEST(GpuMemory, ArenaIsThePlanAndMeasuredMatchesPlannedTotal) {
  MNEMO_REQUIRE_GPU();
  for (const char* mode : {"none", "share", "sublinear"}) {
    const StepResult r = gpu_step(kResnet, mode);
    EXPECT_EQ(r.allocated_arena, align_up(r.arena)) << mode << ": the executor allocates exactly the planned arena";
    // mnemo's allocations: arena + parameters + the two input tensors, each rounded to 256 bytes.
    EXPECT_GE(r.mnemo_allocated, r.total) << mode;
    EXPECT_LE(r.mnemo_allocated - r.total, 256 * 200) << mode << ": only alignment beyond the planned total";
    // cudaMemGetInfo counts whole pages and what cuDNN/cuBLAS load lazily (kernel modules).
    EXPECT_GE(r.measured, r.mnemo_allocated - (2 << 20)) << mode;
    EXPECT_LE(r.measured - r.mnemo_allocated, int64_t{512} << 20) << mode << ": measured " << r.measured << " vs mnemo "
                                                                 << r.mnemo_allocated;
    std::printf("[ memory   ] %s: planned total %lld, mnemo allocated %lld, measured (in use - at open) %lld bytes\n", mode,
                static_cast<long long>(r.total), static_cast<long long>(r.mnemo_allocated), static_cast<long long>(r.measured));
  }
}

// The same byte for byte in every memory mode and schedule order (the order changes lifetimes,
// hence the arena): the executor allocates the planned arena, mnemo nothing beyond the plan but
// alignment; and every order computes the default order's loss and gradients bitwise.
TEST(GpuMemory, EveryModeAndOrderAllocatesThePlan) {
  MNEMO_REQUIRE_GPU();
  for (const char* cfg : {kResnet, kLstm}) {
    const StepResult ref = gpu_step(cfg, "share");
    for (const char* order : {"default", "greedy", "updates-last", "optimal"})
      for (const std::string& mode : modes_for(cfg)) {
        const StepResult r = gpu_step(std::string(cfg) + "order: " + order + "\n", mode);
        EXPECT_EQ(r.allocated_arena, align_up(r.arena)) << mode << ", order " << order;
        EXPECT_GE(r.mnemo_allocated, r.total) << mode << ", order " << order;
        EXPECT_LE(r.mnemo_allocated - r.total, 256 * 200) << mode << ", order " << order;
        EXPECT_TRUE(bitwise_equal(r.loss, ref.loss)) << mode << ", order " << order;
        ASSERT_EQ(r.grads.size(), ref.grads.size());
        for (size_t k = 0; k < r.grads.size(); ++k)
          EXPECT_TRUE(bitwise_equal(r.grads[k], ref.grads[k])) << mode << ", order " << order << ", grad " << k;
      }
  }
}

// Data parallelism on the device (docs/PARALLEL.md). A stand-in for the other ranks: rank 0 of
// `size`, whose device half copies this rank's row of a bucket into every other row on the step's
// stream (as if every rank computed the same gradients); the mean is then the gradient itself,
// exactly for 2 ranks.
class DeviceMirror : public DeviceGather {
 public:
  explicit DeviceMirror(int size) : size_(size) {}
  void start(void* buf, int64_t bytes, void* stream) override {
    for (int r = 1; r < size_; ++r)
      ASSERT_EQ(cudaMemcpyAsync(static_cast<char*>(buf) + r * bytes, buf, static_cast<size_t>(bytes), cudaMemcpyDeviceToDevice,
                                static_cast<cudaStream_t>(stream)),
                cudaSuccess);
    ++starts;
  }
  void wait(void*, void*) override { ++waits; }
  void abort() override { ADD_FAILURE() << "an abort without a timeout"; }
  int starts = 0, waits = 0;

 private:
  int size_;
};
class MirrorComm : public Communicator {
 public:
  explicit MirrorComm(int size) : size_(size), device_(size) {}
  int rank() const override { return 0; }
  int size() const override { return size_; }
  void start_gather(void*, int64_t) override { ADD_FAILURE() << "a host gather in a GPU step"; }
  void wait_gather(void*, const std::string&) override { ADD_FAILURE() << "a host gather in a GPU step"; }
  DeviceGather* device() const override { return const_cast<DeviceMirror*>(&device_); }
  const DeviceMirror& mirror() const { return device_; }

 private:
  int size_;
  DeviceMirror device_;
};

// `runs` SGD steps on the GPU with the update inside (the same batch; with `capture`, the second
// run is captured and later ones replay it); the loss of every run and every parameter after them.
// `reduce_one_rank`: one rank keeps the all-reduce nodes.
std::vector<Tensor> gpu_train_step(const std::string& cfg_text, int ranks, bool capture = false, int runs = 1,
                                   bool reduce_one_rank = false, int* captures = nullptr) {
  TempDir d;
  Config c = load_config(d.file("c.yaml", cfg_text));
  c.parallel.bucket_bytes = 20000;  // several buckets
  const DataShape ds = static_data_shape(c);
  const Pipeline p = build_pipeline(c, ds, c.data.batch, ranks, reduce_one_rank);
  ParamStore params(p.model.builder.graph(), p.model.builder.params(), c.run.seed);
  Sgd sgd(params, {0.1, 0.9, 1e-4});
  Device& dev = gpu();
  const MirrorResult mr = plan_pipeline(c, p, "share", &dev, true);
  std::vector<Tensor> out;
  {
    DeviceParams dp(dev, params, &sgd);
    Executor ex(mr.training.graph, mr.planned.plan, &dev);
    dp.bind(ex);
    const Graph& g = mr.training.graph;
    Tensor x(g.node(g.find(p.model.data)).outputs[0]), y(g.node(g.find(p.model.labels)).outputs[0]), lr(DType::f32, {1});
    fill_normal(x, 7);
    fill_ints(y, 8, ds.classes);
    lr.as<float>()[0] = 0.05f;
    DeviceTensor dx(dev, x.type()), dy(dev, y.type()), dlr(dev, lr.type());
    dx.upload(x);
    dy.upload(y);
    dlr.upload(lr);
    ex.bind(p.model.data, dx.v);
    ex.bind(p.model.labels, dy.v);
    ex.bind(mr.training.lr, dlr.v);
    ex.set_capture(capture);
    for (int i = 0; i < runs; ++i) {
      ex.run();
      dev.synchronize();
      out.push_back(ex.fetch(mr.training.loss));
      EXPECT_EQ(ex.fetch(mr.training.status).as<int32_t>()[0], 0);
    }
    if (captures) *captures = ex.captures();
    dp.download();
  }
  for (const ParamSpec& s : params.specs()) out.push_back(clone(params.at(s.name)));
  return out;
}

// The all-reduce nodes on the GPU (copy into the bucket, the device half's gather ordered on the
// step's stream, the mean kernel): with every rank's gradients equal, the step is bitwise the
// single-process step.
TEST(GpuDataParallel, StepWithAllReduceIsTheSingleProcessStep) {
  MNEMO_REQUIRE_GPU();
  for (const char* cfg : {kResnet, kLstm}) {
    const std::vector<Tensor> ref = gpu_train_step(cfg, 1);
    MirrorComm comm(2);
    set_communicator(&comm);
    const std::vector<Tensor> two = gpu_train_step(cfg, 2);
    set_communicator(nullptr);
    EXPECT_GT(comm.mirror().starts, 1);
    EXPECT_EQ(comm.mirror().starts, comm.mirror().waits);
    ASSERT_EQ(two.size(), ref.size());
    for (size_t k = 0; k < ref.size(); ++k) EXPECT_TRUE(bitwise_equal(two[k], ref[k])) << "output " << k;
  }
}

// A data-parallel step captured as a CUDA graph (the all-reduce's copies, the device half's work
// ordered through events on its own stream, the means) replays to the bits of the eager steps.
TEST(GpuDataParallel, CapturedStepEqualsEagerBitwise) {
  MNEMO_REQUIRE_GPU();
  for (const char* cfg : {kResnet, kLstm}) {
    MirrorComm comm(2);
    set_communicator(&comm);
    const std::vector<Tensor> eager = gpu_train_step(cfg, 2, false, 3);
    int captures = 0;
    const std::vector<Tensor> replayed = gpu_train_step(cfg, 2, true, 3, false, &captures);
    set_communicator(nullptr);
    EXPECT_EQ(captures, 1) << "the first run is eager, the second captured, the third replayed";
    ASSERT_EQ(replayed.size(), eager.size());
    for (size_t k = 0; k < eager.size(); ++k) EXPECT_TRUE(bitwise_equal(replayed[k], eager[k])) << "output " << k;
  }
}

#ifdef MNEMO_HAVE_NCCL
// The same with NCCL over one rank (parallel.reduce_one_rank): its gathers are captured too, and
// the steps equal the plain single-process steps (the mean of one row is the row).
TEST(GpuDataParallel, NcclOneRankStepCapturedEqualsThePlainStep) {
  MNEMO_REQUIRE_GPU();
  for (const char* cfg : {kResnet, kLstm}) {
    const std::vector<Tensor> plain = gpu_train_step(cfg, 1, false, 3);
    OneRankCommunicator comm;
    comm.attach_device(cuda::open_nccl(cuda::nccl_unique_id(), 0, 1, 0));
    set_communicator(&comm);
    int captures = 0;
    const std::vector<Tensor> reduced = gpu_train_step(cfg, 1, true, 3, true, &captures);
    set_communicator(nullptr);
    EXPECT_EQ(captures, 1);
    ASSERT_EQ(reduced.size(), plain.size());
    for (size_t k = 0; k < plain.size(); ++k) EXPECT_TRUE(bitwise_equal(reduced[k], plain[k])) << "output " << k;
  }
}

// NCCL itself with one rank: a communicator opens, an in-place gather of one row runs on its
// stream, ordered after and before the step's stream's work, and leaves the row as it was.
TEST(GpuDataParallel, NcclOneRankGather) {
  MNEMO_REQUIRE_GPU();
  Device& dev = gpu();
  std::unique_ptr<DeviceGather> nccl = cuda::open_nccl(cuda::nccl_unique_id(), 0, 1, 0);
  Tensor h(DType::f32, {1, 1000});
  fill_normal(h, 3);
  DeviceTensor b(dev, h.type());
  b.upload(h);
  void* stream = static_cast<cuda::Context*>(dev.kernel_context())->stream;
  nccl->start(b.v.data, static_cast<int64_t>(h.bytes()), stream);
  nccl->wait(b.v.data, stream);
  dev.synchronize();
  EXPECT_TRUE(bitwise_equal(b.download(), h));
}
#endif

// A gather that never completes, as when another rank hangs: a host function on the step's stream
// blocks until a gate opens. With a wait limit the host's wait throws within it, naming who waited
// and the limit; the timeout callback gets the same message. Where the callback ends the blocked
// work (as ncclCommAbort ends NCCL's kernels) the device is usable again; where nothing does, the
// device refuses further waits instead of hanging in them, and its destructor returns.
struct Gate {
  std::mutex mu;
  std::condition_variable cv;
  bool open = false;
  void release() {
    {
      std::lock_guard lk(mu);
      open = true;
    }
    cv.notify_all();
  }
  static void CUDART_CB block(void* p) {
    auto* g = static_cast<Gate*>(p);
    std::unique_lock lk(g->mu);
    g->cv.wait(lk, [g] { return g->open; });
  }
};

std::string timed_out_wait(Device& dev, Gate& gate, double* seconds) {
  cudaStream_t s = static_cast<cuda::Context*>(dev.kernel_context())->stream;
  EXPECT_EQ(cudaLaunchHostFunc(s, &Gate::block, &gate), cudaSuccess);
  const auto t0 = std::chrono::steady_clock::now();
  std::string msg;
  try {
    dev.synchronize();
    ADD_FAILURE() << "a blocked stream's wait returned";
  } catch (const Error& e) {
    msg = e.what();
  }
  *seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  return msg;
}

TEST(GpuDataParallel, AHungGatherEndsTheWaitWithinTheLimit) {
  MNEMO_REQUIRE_GPU();
  {
    std::unique_ptr<Device> dev = cuda::open_device(0);
    Gate gate;
    std::string told;
    dev->limit_waits(0.5, "rank 1 of 2", [&](const std::string& m) {
      told = m;
      gate.release();  // what aborting NCCL does to its kernels
    });
    double took = 0;
    const std::string msg = timed_out_wait(*dev, gate, &took);
    EXPECT_GE(took, 0.5);
    EXPECT_LT(took, 5.0);
    for (const char* part : {"rank 1 of 2: the step's work on cuda:0", "did not complete within 0.5 s (parallel.timeout_s)",
                             "another rank died, hangs", "the communicator was aborted"})
      EXPECT_NE(msg.find(part), std::string::npos) << "'" << part << "' not in: " << msg;
    EXPECT_EQ(msg.find("did not end"), std::string::npos) << msg;
    EXPECT_EQ(msg.rfind(told, 0), 0u) << "the callback was told '" << told << "'";
    // The device works again.
    Tensor h(DType::f32, {257});
    fill_normal(h, 5);
    DeviceTensor b(*dev, h.type());
    b.upload(h);
    EXPECT_TRUE(bitwise_equal(b.download(), h));
  }
  {
    std::unique_ptr<Device> dev = cuda::open_device(0);
    Gate& gate = *new Gate;  // (leaked: the released callback may still hold its mutex after this scope)
    int told = 0;
    dev->limit_waits(0.3, "rank 0 of 3", [&](const std::string&) { ++told; });
    double took = 0;
    const std::string msg = timed_out_wait(*dev, gate, &took);
    EXPECT_EQ(told, 1);
    EXPECT_LT(took, 0.3 + 5.0 + 2.0);  // the limit, the drain allowance, slack
    EXPECT_NE(msg.find("the device's work did not end"), std::string::npos) << msg;
    EXPECT_THROW(dev->synchronize(), Error);  // refused at once, not another hang
    dev.reset();                              // returns: nothing is freed on a stuck device
    gate.release();
  }
}

TEST(GpuTraining, TracksTheCpuRun) {
  MNEMO_REQUIRE_GPU();
  TempDir d;
  const std::string cfg = d.file("c.yaml",
                                 "model: {type: resnet, style: cifar, depth: 8, width: 4}\n"
                                 "data: {source: synthetic, shape: [3, 8, 8], classes: 3, batch: 8, size: 80, eval_size: 16}\n"
                                 "optimizer: {lr: 0.05, momentum: 0.9, weight_decay: 0.001}\n"
                                 "train: {steps: 10, seed: 3, threads: 1}\n");
  auto train = [&](const std::string& device) {
    TrainOptions o;
    o.config = cfg;
    o.device = device;
    o.checkpoint = d.file(device + ".safetensors");
    o.eval = true;
    EXPECT_EQ(run_train(o), 0);
    return read_safetensors(o.checkpoint);
  };
  const TensorFile cpu = train("cpu"), gpu_run = train("cuda");
  ASSERT_EQ(cpu.tensors.size(), gpu_run.tensors.size());
  for (const auto& [name, t] : cpu.tensors) EXPECT_LE(max_rel_diff(t, gpu_run.tensors.at(name)), 1e-3) << name;
}

}  // namespace
}  // namespace mnemo::test
