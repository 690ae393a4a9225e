// Tests generated from the op registry: every op file registers, every compute op has a sample,
// every differentiable op's backward matches central differences in float64, float32 kernels
// agree with float64 ones, and declared in-place options hold when output == input.
#include <cmath>
#include <cstring>
#include <set>

#include "autograd/gradient.h"
#include "test_util.h"

namespace mnemo::test {
namespace {

std::vector<std::string> ops_where(bool (*pred)(const OpDef&)) {
  std::vector<std::string> names;
  for (const OpDef* d : op_registry().all())
    if (pred(*d)) names.push_back(d->name);
  return names;
}

TEST(Registry, EveryOpFileRegistersAnOp) {
  std::set<std::string> files;
  for (const OpDef* d : op_registry().all()) files.insert(d->file);
  ASSERT_FALSE(op_source_files().empty());
  for (const std::string& f : op_source_files()) EXPECT_TRUE(files.count(f)) << "ops/" << f << ".cpp registers no op";
}

// DESIGN.md: "adding an op touches only its files". What planners need is declared with the op
// (traits), and which backends it has is an explicit claim checked against the kernels: the CPU
// kernel here, the CUDA table in tests/device_test.cpp (CUDA builds).
TEST(Registry, TraitsAndBackendClaimsAreDeclaredWithTheOps) {
  std::set<std::string> cheap, updates;
  for (const OpDef* d : op_registry().all()) {
    if (d->kind != OpKind::compute) continue;
    EXPECT_EQ(d->backends.cpu, d->cpu != nullptr) << d->name << ": CPU claim";
    EXPECT_TRUE(d->backends.cpu) << d->name << ": every compute op has a CPU kernel (the reference)";
    if (d->traits.cheap_recompute) cheap.insert(d->name);
    if (d->traits.updates_state) updates.insert(d->name);
    EXPECT_EQ(!d->updates.empty(), d->traits.updates_state) << d->name << ": in-place state updates need the trait";
  }
  // drop-bn-relu drops exactly these (Chen et al. Sec. 4.2: BN, ReLU and its clipped form relu6,
  // pooling); the planner reads the trait, so a new cheap op joins by declaring it.
  EXPECT_EQ(cheap, (std::set<std::string>{"avg_pool2d", "batch_norm", "clip", "global_avg_pool", "max_pool2d", "relu"}));
  EXPECT_EQ(updates, (std::set<std::string>{"assign", "sgd_update"}));
}

TEST(Registry, EveryComputeOpHasASampleThatInfers) {
  for (const OpDef* d : op_registry().all()) {
    if (d->kind != OpKind::compute) continue;
    ASSERT_TRUE(d->sample.has_value()) << d->name << " has no sample";
    Graph g;
    std::vector<EntryRef> in;
    for (size_t i = 0; i < d->sample->inputs.size(); ++i) in.push_back(g.input("x" + std::to_string(i), d->sample->inputs[i]));
    EXPECT_NO_THROW(g.add(d->name, in, d->sample->attrs)) << d->name;
    for (const InplaceOption& o : d->inplace) {
      ASSERT_LT(o.input, static_cast<int>(in.size())) << d->name;
      const int id = static_cast<int>(g.size()) - 1;
      ASSERT_LT(o.output, static_cast<int>(g.node(id).outputs.size())) << d->name;
      EXPECT_EQ(g.type(in[o.input]), g.node(id).outputs[o.output]) << d->name << ": in-place option between different types";
    }
  }
}

// Every compute op moves bytes, so its cost (budget's objective, docs/MEMORY.md "Recompute cost")
// is never zero: an op without a cost function gets OpDef::cost's default, its inputs and outputs
// (until 2026-11-28 node_cost returned zero for them, and budget recomputed the layout reorders
// to_plain / to_blocked as if they were free).
TEST(Registry, EveryComputeOpCostsAtLeastItsBytes) {
  for (const OpDef* d : op_registry().all()) {
    if (d->kind != OpKind::compute || !d->sample) continue;
    Graph g;
    std::vector<EntryRef> in;
    for (size_t i = 0; i < d->sample->inputs.size(); ++i) in.push_back(g.input("x" + std::to_string(i), d->sample->inputs[i]));
    const int id = g.add(d->name, in, d->sample->attrs);
    double bytes = 0;
    for (const TensorType& t : g.node(id).outputs) bytes += static_cast<double>(t.bytes());
    const Cost c = node_cost(g, id);
    EXPECT_GT(c.bytes, 0) << d->name;
    EXPECT_GT(c.roofline(10), 0) << d->name;
    if (!d->cost) {
      for (const EntryRef& e : in) bytes += static_cast<double>(g.type(e).bytes());
      EXPECT_EQ(c.bytes, bytes) << d->name << ": the default is its inputs and outputs";
      EXPECT_EQ(c.flops, 0) << d->name;
    }
  }
}

TEST(Registry, UnknownOpAndUnknownAttributeAreClearErrors) {
  Graph g;
  EntryRef x = g.input("x", {DType::f32, {2, 3}});
  try {
    g.add("no_such_op", {x});
    FAIL();
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("unknown op 'no_such_op'"), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find("relu"), std::string::npos) << "lists known ops: " << e.what();
  }
  try {
    g.add("relu", {x}, {{"alpha", 0.1}}, "r");
    FAIL();
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("unknown attribute(s) alpha"), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find("'r'"), std::string::npos) << "names the node: " << e.what();
  }
}

// Builds the sample graph of `d` in dtype `ft` with every float input a trainable param.
struct SampleGraph {
  Graph g;
  int node = -1;
  std::vector<Tensor> values;  // per sample input
  std::vector<std::string> names;
};

SampleGraph make_sample(const OpDef& d, DType ft, uint64_t seed) {
  SampleGraph s;
  std::vector<EntryRef> in;
  for (size_t i = 0; i < d.sample->inputs.size(); ++i) {
    TensorType t = d.sample->inputs[i];
    const std::string name = "x" + std::to_string(i);
    if (is_float(t.dtype)) {
      t.dtype = ft;
      in.push_back(s.g.param(name, t));
      Tensor v(t);
      fill_distinct(v, seed + i);
      s.values.push_back(std::move(v));
    } else {
      in.push_back(s.g.input(name, t));
      Tensor v(t);
      fill_ints(v, seed + i, d.sample->int_high);
      s.values.push_back(std::move(v));
    }
    s.names.push_back(name);
  }
  s.node = s.g.add(d.name, in, d.sample->attrs, "op");
  return s;
}

class GradCheck : public ::testing::TestWithParam<std::string> {};

// Objective J = sum_j <y_j, r_j> over the op's differentiable float outputs; dJ/dx from the
// backward graph against (J(x+h) - J(x-h)) / 2h, h = 1e-6, in float64.
TEST_P(GradCheck, BackwardMatchesCentralDifferences) {
  const OpDef& d = op_registry().get(GetParam());
  SampleGraph s = make_sample(d, DType::f64, 17);
  std::vector<Seed> seeds;
  std::vector<Tensor> r;
  std::vector<std::pair<std::string, const Tensor*>> bind;
  const Node& node = s.g.node(s.node);
  for (size_t j = 0; j < node.outputs.size(); ++j) {
    bool saved = false;
    for (int k : d.saved_outputs) saved |= k == static_cast<int>(j);
    if (saved || !is_float(node.outputs[j].dtype)) continue;
    r.emplace_back(node.outputs[j]);
  }
  size_t ri = 0;
  for (size_t j = 0; j < node.outputs.size(); ++j) {
    bool saved = false;
    for (int k : d.saved_outputs) saved |= k == static_cast<int>(j);
    if (saved || !is_float(node.outputs[j].dtype)) continue;
    fill_distinct(r[ri], 1000 + j);
    const std::string name = "r" + std::to_string(j);
    seeds.push_back({{s.node, static_cast<int>(j)}, s.g.input(name, node.outputs[j])});
    bind.push_back({name, &r[ri]});
    ++ri;
  }
  std::vector<int> wrt;
  for (size_t i = 0; i < s.values.size(); ++i) {
    bind.push_back({s.names[i], &s.values[i]});
    if (is_float(s.values[i].dtype())) wrt.push_back(s.g.find(s.names[i]));
  }
  ASSERT_FALSE(wrt.empty());
  TrainingGraph tg = build_gradient_graph(s.g, seeds, wrt, {});
  std::vector<EntryRef> grad_entries;
  for (const ParamGrad& pg : tg.grads) grad_entries.push_back(pg.grad);
  std::vector<Tensor> analytic = run_graph(tg.graph, bind, grad_entries);

  auto objective = [&]() {
    std::vector<EntryRef> outs;
    for (const Seed& sd : seeds) outs.push_back(sd.entry);
    std::vector<Tensor> ys = run_graph(s.g, bind, outs);
    double j = 0;
    for (size_t k = 0; k < ys.size(); ++k)
      for (int64_t i = 0; i < ys[k].numel(); ++i) j += get(ys[k], i) * get(r[k], i);
    return j;
  };
  const double h = 1e-6;
  int checked = 0;
  for (size_t w = 0; w < wrt.size(); ++w) {
    Tensor& x = s.values[static_cast<size_t>(std::find(s.names.begin(), s.names.end(), s.g.node(wrt[w]).name) - s.names.begin())];
    const int64_t n = x.numel();
    const int64_t stride = std::max<int64_t>(1, n / 40);  // at most ~40 elements per input
    for (int64_t i = 0; i < n; i += stride) {
      const double x0 = get(x, i);
      set(x, i, x0 + h);
      const double jp = objective();
      set(x, i, x0 - h);
      const double jm = objective();
      set(x, i, x0);
      const double num = (jp - jm) / (2 * h);
      const double ana = get(analytic[w], i);
      EXPECT_LE(std::abs(ana - num), 1e-5 * std::max({std::abs(ana), std::abs(num), 1.0}))
          << d.name << " input " << s.g.node(wrt[w]).name << "[" << i << "]: analytic " << ana << ", numeric " << num;
      ++checked;
    }
  }
  EXPECT_GT(checked, 0);
}

INSTANTIATE_TEST_SUITE_P(AllDifferentiableOps, GradCheck,
                         ::testing::ValuesIn(ops_where([](const OpDef& d) { return d.grad && d.sample; })),
                         [](const auto& info) { return info.param; });

class KernelParity : public ::testing::TestWithParam<std::string> {};

// The float32 kernel computes what the float64 kernel computes, to float32 accuracy.
TEST_P(KernelParity, Float32MatchesFloat64) {
  const OpDef& d = op_registry().get(GetParam());
  SampleGraph s64 = make_sample(d, DType::f64, 5);
  SampleGraph s32 = make_sample(d, DType::f32, 5);
  std::vector<std::pair<std::string, const Tensor*>> b64, b32;
  for (size_t i = 0; i < s64.values.size(); ++i) {
    b64.push_back({s64.names[i], &s64.values[i]});
    b32.push_back({s32.names[i], &s32.values[i]});
  }
  std::vector<EntryRef> outs;
  for (size_t j = 0; j < s64.g.node(s64.node).outputs.size(); ++j) outs.push_back({s64.node, static_cast<int>(j)});
  auto y64 = run_graph(s64.g, b64, outs);
  auto y32 = run_graph(s32.g, b32, outs);
  for (size_t j = 0; j < outs.size(); ++j) {
    if (!is_float(y64[j].dtype())) {
      EXPECT_TRUE(bitwise_equal(y64[j], y32[j])) << d.name << " output " << j;
      continue;
    }
    EXPECT_LE(max_rel_diff(cast(y32[j], DType::f64), cast(y64[j], DType::f64)), 2e-5) << d.name << " output " << j;
  }
}

// Each declared in-place option: running with output j in input i's buffer gives the same result.
TEST_P(KernelParity, InplaceOptionsHold) {
  const OpDef& d = op_registry().get(GetParam());
  for (const InplaceOption& o : d.inplace) {
    SampleGraph s = make_sample(d, DType::f32, 9);
    const Node& n = s.g.node(s.node);
    std::vector<TensorView> in;
    for (const Tensor& v : s.values) in.push_back(v.view());
    std::vector<Tensor> ref_out, alias_out;
    std::vector<TensorView> ref_views, alias_views;
    for (const TensorType& t : n.outputs) ref_out.emplace_back(t), alias_out.emplace_back(t);
    for (auto& t : ref_out) ref_views.push_back(t.view());
    const PreparedKernel k = cpu_device().prepare(s.g, s.node);
    const size_t ws_bytes = k.workspace;
    Tensor ws(DType::f32, {static_cast<int64_t>(ws_bytes / 4 + 1)});
    k.run(KernelContext{in, ref_views, n.params.get(), ws.data(), ws_bytes, nullptr, k.state.get()});
    Tensor aliased_input(s.values[o.input].type());
    std::memcpy(aliased_input.data(), s.values[o.input].data(), aliased_input.bytes());
    std::vector<TensorView> in2 = in;
    in2[o.input] = aliased_input.view();
    for (auto& t : alias_out) alias_views.push_back(t.view());
    alias_views[o.output] = aliased_input.view();
    k.run(KernelContext{in2, alias_views, n.params.get(), ws.data(), ws_bytes, nullptr, k.state.get()});
    EXPECT_TRUE(bitwise_equal(ref_out[o.output], aliased_input)) << d.name << " in-place " << o.input << "->" << o.output;
  }
}

INSTANTIATE_TEST_SUITE_P(AllComputeOps, KernelParity,
                         ::testing::ValuesIn(ops_where([](const OpDef& d) { return d.kind == OpKind::compute && d.sample.has_value(); })),
                         [](const auto& info) { return info.param; });

}  // namespace
}  // namespace mnemo::test

namespace mnemo::test {
namespace {

// oneDNN indexes with 32 bits: a convolution whose batch takes x or y past 2^31 - 1 elements runs
// on the im2col kernels (64-bit indices; no oneDNN state), every pass; a smaller one on oneDNN where
// it offers a kernel; one sample past the range is refused naming the node.
TEST(Registry, AConvolutionBatchPastInt32RunsOnIm2colAndOneSampleIsRefused) {
  auto f32 = [](Shape s) { return TensorType{DType::f32, std::move(s)}; };
  for (const int64_t n : {int64_t{2}, int64_t{524589}}) {
    const TensorType x = f32({n, 1, 64, 64}), w = f32({1, 1, 3, 3});
    const Attrs pad{{"padding", int64_t{1}}};
    Attrs ad = pad, aw = pad;
    ad["input_hw"] = std::vector<int64_t>{64, 64};
    aw["kernel"] = std::vector<int64_t>{3, 3};
    const std::pair<std::string, std::pair<std::vector<TensorType>, Attrs>> runs[] = {
        {"conv2d", {{x, w}, pad}}, {"conv2d_grad_data", {{x, w}, ad}}, {"conv2d_grad_weight", {{x, x}, aw}}};
    for (const auto& [op, io] : runs) {
      Graph g;
      std::vector<EntryRef> in;
      for (size_t i = 0; i < io.first.size(); ++i) in.push_back(g.input("x" + std::to_string(i), io.first[i]));
      const int node = g.add(op, in, io.second, "conv");
      const PreparedKernel k = cpu_device().prepare(g, node);
      if (n > 2) EXPECT_EQ(k.state, nullptr) << op << " x " << x.str() << ": past 2^31 - 1 elements, no oneDNN primitive";
      else EXPECT_NE(k.state, nullptr) << op << " x " << x.str() << ": oneDNN";
    }
  }
  Graph g;
  try {
    g.add("conv2d", {g.input("x", f32({1, 1, 46341, 46341})), g.input("w", f32({1, 1, 3, 3}))}, {{"padding", int64_t{1}}},
          "huge");
    ADD_FAILURE() << "a sample of 46341 x 46341 elements was accepted";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("'huge'"), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find("one sample of x would have 2147488281 elements"), std::string::npos) << e.what();
  }
}

// The im2col kernels on a batch past 2^31 elements for real, every pass (test_util.h's BigConv:
// two 8.6 GB tensors, about 17 GB of memory, a minute on 2 cores): skipped unless
// MNEMO_HUGE_TESTS=1 and 20 GB are available. Forward and data gradient on samples at both ends
// and the middle against float64, every element written; the weight gradient against a float64
// sum over the batch within 2% of its spread.
TEST(Registry, TheIm2colKernelsRunABatchPastInt32) {
  const char* huge = std::getenv("MNEMO_HUGE_TESTS");
  if (!huge || std::string(huge) != "1") GTEST_SKIP() << "set MNEMO_HUGE_TESTS=1 (needs about 17 GB of memory)";
  const int64_t available = static_cast<int64_t>(sysconf(_SC_AVPHYS_PAGES)) * sysconf(_SC_PAGESIZE);
  if (available < (int64_t{20} << 30)) GTEST_SKIP() << "needs 20 GB of available memory, " << (available >> 20) << " MiB available";
  using B = BigConv;
  const int64_t elems = B::N * B::S;
  const TensorType big{DType::f32, {B::N, 1, B::H, B::W}}, wt{DType::f32, {1, 1, 3, 3}};
  Tensor w(wt);
  fill_distinct(w, 5);
  auto fill = [&](Tensor& t, float (*value)(int64_t)) {
    float* p = t.as<float>();
#pragma omp parallel for
    for (int64_t i = 0; i < elems; ++i) p[i] = value(i);
  };
  auto run = [&](const std::string& op, const Attrs& a, const Tensor& in0, const Tensor& in1, Tensor& out) {
    Graph g;
    const int node = g.add(op, {g.input("a", in0.type()), g.input("b", in1.type())}, a, "op");
    const PreparedKernel k = cpu_device().prepare(g, node);
    EXPECT_EQ(k.state, nullptr) << op << ": no oneDNN primitive past 2^31 - 1 elements";
    std::vector<char> ws(k.workspace + 64);
    float* o = out.as<float>();
    for (int64_t i = 0; i < out.numel(); ++i) o[i] = NAN;
    std::vector<TensorView> in = {in0.view(), in1.view()}, ov = {out.view()};
    k.run(KernelContext{in, ov, g.node(node).params.get(), ws.data(), k.workspace, nullptr, k.state.get()});
    for (int64_t i = 0; i < out.numel(); ++i)
      if (std::isnan(o[i])) return ADD_FAILURE() << op << ": element " << i << " not written";
  };
  const int64_t checked[] = {0, 1, B::N / 2 - 1, B::N / 2, B::N / 2 + 1, B::N - 2, B::N - 1};
  Tensor a(big), out(big);
  fill(a, B::x_at);
  run("conv2d", {{"padding", int64_t{1}}}, a, w, out);
  for (int64_t n : checked)
    EXPECT_LE(B::sample_error(out.as<float>() + n * B::S, n, w.as<float>(), false), 1e-5) << "conv2d: sample " << n;
  fill(out, B::dy_at);  // dy
  Tensor dw(wt);
  run("conv2d_grad_weight", {{"padding", int64_t{1}}, {"kernel", std::vector<int64_t>{3, 3}}}, out, a, dw);
  double ref[9], spread[9];
  B::weight_grad(ref, spread);
  for (int k = 0; k < 9; ++k)
    EXPECT_LE(std::abs(dw.as<float>()[k] - ref[k]), 0.02 * spread[k]) << "conv2d_grad_weight tap " << k << ": " << dw.as<float>()[k]
                                                                     << " vs float64 " << ref[k];
  run("conv2d_grad_data", {{"padding", int64_t{1}}, {"input_hw", std::vector<int64_t>{B::H, B::W}}}, out, w, a);
  for (int64_t n : checked)
    EXPECT_LE(B::sample_error(a.as<float>() + n * B::S, n, w.as<float>(), true), 1e-5) << "conv2d_grad_data: sample " << n;
}

}  // namespace
}  // namespace mnemo::test
