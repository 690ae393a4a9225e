// The device code path without a GPU: every CPU run goes through the CPU device
// (core/cpu_device.h), the path a GPU run takes (prepared kernels, device arena, parameters and
// SGD state bound where the device reads them, the update inside the step, double-buffered staged
// inputs, fetch, checkpoint download with a batch already staged); `host` is another name for it,
// and its results are bitwise those of `cpu`. Plus device selection errors, device workspace in
// plans, the executor's capture logic, and (in CUDA builds) that each op's backend claims hold.
#include "autograd/gradient.h"
#include "core/cpu_device.h"
#include "memory/planner.h"
#include "memory/mirror_planner.h"
#include "models/small_nets.h"
#include "train/session/inspect.h"
#include "train/session/param_store.h"
#include "test_util.h"
#include "train/parallel/run_comm.h"
#include "train/session/device_state.h"
#include "train/session/safetensors.h"
#include "train/session/session.h"
#ifdef MNEMO_HAVE_CUDA
#include "cuda/context.h"
#include "cuda/device.h"
#endif

namespace mnemo::test {
namespace {

// A tiny ResNet: BN running statistics (state updates on the device), momentum, weight decay,
// a schedule, an epoch boundary at 10 batches.
std::string tiny_resnet(const TempDir& d, const std::string& memory) {
  return d.file("c.yaml", "model: {type: resnet, style: cifar, depth: 8, width: 4}\n"
                          "data: {source: synthetic, shape: [3, 8, 8], classes: 3, batch: 4, size: 40, eval_size: 8}\n"
                          "optimizer: {lr: 0.05, momentum: 0.9, weight_decay: 0.001}\n"
                          "schedule: {type: step, milestones: [9], gamma: 0.5}\n"
                          "train: {steps: 13, seed: 3, threads: 1}\nmemory: " + memory + "\n");
}

TensorFile train_to(const std::string& cfg, const std::string& device, int64_t steps, const std::string& out,
                    const std::string& resume = "") {
  TrainOptions o;
  o.config = cfg;
  o.device = device;
  o.steps = steps;
  o.checkpoint = out;
  o.resume = resume;
  o.eval = false;
  EXPECT_EQ(run_train(o), 0);
  return read_safetensors(out);
}

void expect_bitwise(const TensorFile& a, const TensorFile& b, const std::string& what) {
  ASSERT_EQ(a.tensors.size(), b.tensors.size()) << what;
  for (const auto& [name, t] : a.tensors) {
    ASSERT_TRUE(b.tensors.count(name)) << what << ": " << name;
    EXPECT_TRUE(bitwise_equal(t, b.tensors.at(name))) << what << ": " << name << " differs";
  }
}

TEST(Device, HostDeviceTrainingEqualsCpuBitwise) {
  for (const char* mode : {"share", "sublinear"}) {
    TempDir d;
    const std::string cfg = tiny_resnet(d, mode);
    TensorFile cpu = train_to(cfg, "cpu", 13, d.file("cpu.safetensors"));
    TensorFile host = train_to(cfg, "host", 13, d.file("host.safetensors"));
    expect_bitwise(cpu, host, mode);
    EXPECT_EQ(host.metadata.at("data_position"), "13");
  }
}

// Evaluation on a device (the eval graph built once, batches copied in, logits fetched) reports
// what the CPU reports; so does the end-of-run summary of a resume with nothing left to train.
TEST(Device, HostDeviceEvaluationAndResumeAtTheEndMatchTheCpu) {
  TempDir d;
  const std::string cfg = tiny_resnet(d, "share");
  auto output_of = [&](const std::string& device, int64_t steps, const std::string& resume) {
    TrainOptions o;
    o.config = cfg;
    o.device = device;
    o.steps = steps;
    o.resume = resume;
    o.checkpoint = d.file(device + std::to_string(steps) + ".safetensors");
    ::testing::internal::CaptureStdout();
    EXPECT_EQ(run_train(o), 0);
    return ::testing::internal::GetCapturedStdout();
  };
  auto line_of = [](const std::string& out, const std::string& start) {
    const size_t i = out.find(start);
    return i == std::string::npos ? std::string("(no line '" + start + "')") : out.substr(i, out.find('\n', i) - i);
  };
  const std::string cpu = output_of("cpu", 13, ""), host = output_of("host", 13, "");
  EXPECT_NE(line_of(cpu, "test accuracy").find("on 8 examples"), std::string::npos) << cpu;
  EXPECT_EQ(line_of(host, "test accuracy"), line_of(cpu, "test accuracy"));
  EXPECT_NE(cpu.find("evaluation ran in the training arena"), std::string::npos) << cpu;
  const std::string again = output_of("host", 13, d.file("host13.safetensors"));
  EXPECT_NE(again.find("nothing to train: already at step 13 of 13"), std::string::npos) << again;
}

// The device loop takes the next batch from the loader before the step ends; a checkpoint must
// still record the batches trained on, so a resumed run continues exactly.
TEST(Device, HostDeviceResumeEqualsStraightRun) {
  TempDir d;
  const std::string cfg = tiny_resnet(d, "share");
  TensorFile straight = train_to(cfg, "host", 13, d.file("straight.safetensors"));
  TensorFile six = train_to(cfg, "host", 6, d.file("six.safetensors"));
  EXPECT_EQ(six.metadata.at("data_position"), "6");
  TensorFile resumed = train_to(cfg, "host", 13, d.file("resumed.safetensors"), d.file("six.safetensors"));
  expect_bitwise(straight, resumed, "resume");
}

TEST(Device, GradOnHostDeviceEqualsCpu) {
  TempDir d;
  const std::string cfg = d.file("r8.yaml", "model: {type: resnet, style: cifar, depth: 8, width: 4}\n"
                                            "data: {source: synthetic, shape: [3, 8, 8], classes: 5, batch: 4}\n"
                                            "train: {steps: 1, threads: 1}\nmemory: share\n");
  GradOptions g;
  g.config = cfg;
  g.weights = MNEMO_FIXTURE_DIR "/resnet_init.safetensors";
  g.batch = MNEMO_FIXTURE_DIR "/resnet_batch.safetensors";
  g.out = d.file("cpu.safetensors");
  ASSERT_EQ(run_grad(g), 0);
  GradOptions h = g;
  h.device = "host";
  h.memory = "recursive";
  h.out = d.file("host.safetensors");
  ASSERT_EQ(run_grad(h), 0);
  expect_bitwise(read_safetensors(g.out), read_safetensors(h.out), "grad");
}

// Forwards everything to a host device; the test devices below override what they probe.
class HostBacked : public Device {
 public:
  std::string name() const override { return "host-backed"; }
  PreparedKernel prepare(const Graph& g, int id) const override { return host_->prepare(g, id); }
  bool host_memory() const override { return true; }
  void* kernel_context() override { return nullptr; }
  void* allocate(int64_t b, const std::string& w) override { return host_->allocate(b, w); }
  void release(void* p) noexcept override { host_->release(p); }
  void copy(void* d, const void* s, int64_t b, CopyKind k) override { host_->copy(d, s, b, k); }
  void synchronize() override {}
  void reserve_inputs(std::span<const TensorType> t, int s) override { host_->reserve_inputs(t, s); }
  std::vector<TensorView> stage_inputs(std::span<const TensorView> h) override { return host_->stage_inputs(h); }
  int64_t memory_in_use() const override { return host_->memory_in_use(); }
  int64_t memory_at_open() const override { return 0; }
  int64_t allocated_bytes() const override { return host_->allocated_bytes(); }

 protected:
  std::unique_ptr<Device> host_ = make_cpu_device();
};

// A device whose workspace differs from the CPU's: the plan must reserve the device's bytes.
class WideWorkspace final : public HostBacked {
 public:
  PreparedKernel prepare(const Graph& g, int id) const override {
    PreparedKernel k = host_->prepare(g, id);
    k.workspace += 1000;
    return k;
  }
};

TEST(Device, PlansReserveTheDevicesWorkspaceAndTheExecutorAllocatesThePlan) {
  const Graph g = small_model_graph("cnn", 0);
  WideWorkspace wide;
  PlanStats cpu, dev;
  const MemoryPlan cpu_plan = plan_memory(g, AllocMode::share, &cpu);
  const MemoryPlan plan = plan_memory(g, AllocMode::share, &dev, {}, &wide);
  EXPECT_GE(dev.workspace_bytes, cpu.workspace_bytes + 1000);
  int compute = 0;
  for (size_t v = 0; v < g.size(); ++v) {
    if (g.node(static_cast<int>(v)).op->kind != OpKind::compute) continue;
    ++compute;
    EXPECT_EQ(plan.workspace[v].bytes, static_cast<int64_t>(wide.prepare(g, static_cast<int>(v)).workspace));
    EXPECT_EQ(plan.kernels[v].workspace, static_cast<size_t>(plan.workspace[v].bytes)) << "the plan keeps the prepared kernel";
  }
  EXPECT_GT(compute, 3);
  EXPECT_NO_THROW(validate_plan(g, plan, &wide));
  EXPECT_THROW(validate_plan(g, cpu_plan, &wide), Error) << "a CPU plan reserves too little workspace for this device";
  const int64_t before = wide.allocated_bytes();
  {
    Executor ex(g, plan, &wide);
    EXPECT_EQ(wide.allocated_bytes() - before, align_up(plan.arena_bytes)) << "one arena of the planned size";
  }
  EXPECT_EQ(wide.allocated_bytes(), before) << "the arena is returned to the device";
}

// The sublinear search scores its candidate plans in parallel (OpenMP): an error there (here the
// device's workspace query) must reach the caller as mnemo::Error, not terminate the process.
class FailingWorkspace final : public HostBacked {
 public:
  PreparedKernel prepare(const Graph& g, int id) const override {
    MNEMO_CHECK(g.node(id).op->name != "conv2d") << "no workspace answer for '" << g.node(id).name << "'";
    return host_->prepare(g, id);
  }
};

TEST(Device, PlanningErrorsInTheParallelSearchReachTheCaller) {
  Model m = build_small_cnn(4, 8, 4, 3);
  FailingWorkspace dev;
  const SgdSpec sgd;
  for (const char* mode : {"sublinear", "share"}) {
    const std::string e = error_of([&] { plan_mirror(m.builder.graph(), m.loss, parse_memory_mode(mode), {}, &sgd, &dev); });
    EXPECT_NE(e.find("no workspace answer"), std::string::npos) << mode << ": " << e;
  }
}

TEST(Device, StagedInputsAreCopiesInAlternatingSlots) {
  std::unique_ptr<Device> d = make_cpu_device();
  const TensorType types[2] = {{DType::f32, {2, 3}}, {DType::i32, {2}}};
  d->reserve_inputs(types, 2);
  Tensor x(types[0]), y(types[1]);
  fill_distinct(x, 1);
  fill_ints(y, 2, 5);
  const TensorView host[2] = {x.view(), y.view()};
  const std::vector<TensorView> a = d->stage_inputs(host);
  const std::vector<TensorView> b = d->stage_inputs(host);
  const std::vector<TensorView> c = d->stage_inputs(host);
  EXPECT_NE(a[0].data, x.data());
  EXPECT_NE(a[0].data, b[0].data);
  EXPECT_EQ(a[0].data, c[0].data);
  EXPECT_TRUE(bitwise_equal(clone(b[0]), x));
  EXPECT_TRUE(bitwise_equal(clone(b[1]), y));
  const TensorView wrong[2] = {y.view(), x.view()};
  EXPECT_NE(error_of([&] { d->stage_inputs(wrong); }).find("reserved"), std::string::npos);
}

// The GPU a device name means (open_device and the data-parallel NCCL setup share it).
TEST(Device, CudaOrdinalOfADeviceName) {
  EXPECT_EQ(cuda_ordinal("cpu"), -1);
  EXPECT_EQ(cuda_ordinal("host"), -1);
  EXPECT_EQ(cuda_ordinal("cuda"), 0);
  EXPECT_EQ(cuda_ordinal("cuda:3"), 3);
  EXPECT_NE(error_of([] { cuda_ordinal("cuda:", "t.yaml: device"); }).find("t.yaml: device: 'cuda:' is not a device"), std::string::npos);
  EXPECT_NE(error_of([] { cuda_ordinal("cudax"); }).find("--device: 'cudax' is not a device"), std::string::npos);
}

TEST(Device, SelectionErrorsAreClear) {
  EXPECT_NE(open_device("cpu"), nullptr);
  EXPECT_NE(open_device("host"), nullptr);
  EXPECT_TRUE(open_device("cpu")->host_memory());
  EXPECT_NE(error_of([] { open_device("tpu"); }).find("'tpu' is not a device (expected cpu, cuda, cuda:N or host)"),
            std::string::npos);
  EXPECT_NE(error_of([] { open_device("cuda:x"); }).find("is not a device"), std::string::npos);
#ifdef MNEMO_HAVE_CUDA
  std::string why;
  if (cuda::device_count(&why) == 0) {
    const std::string e = error_of([] { open_device("cuda"); });
    EXPECT_NE(e.find("no CUDA device is usable on this machine"), std::string::npos) << e;
    EXPECT_NE(e.find(why), std::string::npos) << "the runtime's reason is in the message: " << e;
  } else {
    EXPECT_NE(error_of([] { open_device("cuda:99"); }).find("numbered 0.."), std::string::npos);
  }
#else
  EXPECT_NE(error_of([] { open_device("cuda"); }).find("has no CUDA backend"), std::string::npos);
#endif
}

// A device that "captures" by keeping the work and "replays" by running it again: enough to test
// the executor's capture logic (first run eager, one graph per set of bound addresses, fallback).
class RecordingDevice final : public HostBacked {
 public:
  int captured = 0, replayed = 0;
  bool fail = false;
  std::shared_ptr<void> capture(const std::function<void()>& work) override {
    if (fail) MNEMO_FAIL() << "capture refused";
    ++captured;
    return std::make_shared<std::function<void()>>(work);
  }
  void replay(const void* captured_work) override {
    ++replayed;
    (*static_cast<const std::function<void()>*>(captured_work))();
  }
};

TEST(Device, CapturedStepsReplayPerBindingAndFallBack) {
  Model m = build_small_cnn(4, 8, 4, 3);
  const Graph& fwd = m.builder.graph();
  TrainingGraph tg = build_training_graph(fwd, m.loss, MirrorPlan(fwd.size(), 1));
  Tensor data(fwd.node(fwd.find(m.data)).outputs[0]), labels(fwd.node(fwd.find(m.labels)).outputs[0]);
  Tensor data2(data.type());
  fill_normal(data, 3);
  fill_normal(data2, 5);
  fill_ints(labels, 4, fwd.type(m.logits).shape[1]);
  ParamStore params(fwd, m.builder.params(), 9);
  auto outputs = [&](Executor& ex) {
    std::vector<Tensor> out;
    for (const EntryRef& e : tg.graph.outputs) out.push_back(ex.fetch(e));
    return out;
  };
  auto reference = [&](const Tensor& x) {
    Executor ex(tg.graph, plan_memory(tg.graph, AllocMode::share));
    params.bind(ex);
    ex.bind(m.data, x.view());
    ex.bind(m.labels, labels.view());
    ex.run();
    return outputs(ex);
  };
  const std::vector<Tensor> want1 = reference(data), want2 = reference(data2);
  auto expect_equal = [](const std::vector<Tensor>& a, const std::vector<Tensor>& b, const char* what) {
    ASSERT_EQ(a.size(), b.size());
    for (size_t k = 0; k < a.size(); ++k) EXPECT_TRUE(bitwise_equal(a[k], b[k])) << what << " output " << k;
  };
  for (bool fail : {false, true}) {
    RecordingDevice dev;
    dev.fail = fail;
    Executor ex(tg.graph, plan_memory(tg.graph, AllocMode::share, nullptr, {}, &dev), &dev);
    ex.set_capture(true);
    params.bind(ex);  // host memory is this device's memory
    ex.bind(m.labels, labels.view());
    for (int run = 0; run < 3; ++run) {
      ex.bind(m.data, data.view());
      ex.run();
      expect_equal(outputs(ex), want1, "first binding");
      ex.bind(m.data, data2.view());
      ex.run();
      expect_equal(outputs(ex), want2, "second binding");
    }
    if (!fail) {
      EXPECT_EQ(dev.captured, 2) << "one graph per set of bound addresses, none for the first (eager) run";
      EXPECT_EQ(ex.captures(), 2);
      EXPECT_EQ(dev.replayed, 5);
    } else {
      EXPECT_EQ(dev.replayed, 0) << "after a failed capture the executor launches node by node";
      EXPECT_EQ(ex.captures(), 0);
    }
  }
}

#ifdef MNEMO_HAVE_CUDA
// Building the table touches no device, so this runs everywhere: each compute op has a CUDA kernel
// exactly when its registration says so (OpDef::backends), and the optimiser ops have one.
TEST(Device, EveryComputeOpsCudaClaimHolds) {
  int checked = 0;
  for (const OpDef* d : op_registry().all())
    if (d->kind == OpKind::compute) {
      EXPECT_EQ(cuda::kernel_table().find(d->name) != nullptr, d->backends.cuda)
          << d->name << (d->backends.cuda ? " claims a CUDA kernel but has none" : " has a CUDA kernel it does not claim");
      ++checked;
    }
  EXPECT_GT(checked, 30);
  EXPECT_NE(cuda::kernel_table().find("sgd_update"), nullptr);
  EXPECT_NE(cuda::kernel_table().find("finite_check"), nullptr);
}
#endif

// After a timeout outside it (a GPU step waiting in NCCL, cuda/device.cpp's bounded waits), the
// run's communicator aborts its device half once and reports itself broken, which the trainer
// checks before starting another collective.
class CountingGather : public DeviceGather {
 public:
  void start(void*, int64_t, void*) override { ADD_FAILURE() << "no gather here"; }
  void wait(void*, void*) override { ADD_FAILURE() << "no gather here"; }
  void abort() override { ++aborts; }
  int aborts = 0;
};

TEST(Device, AbandonedCommunicatorAbortsItsDeviceHalfAndIsBroken) {
  OneRankCommunicator comm;
  auto gather = std::make_unique<CountingGather>();
  CountingGather* g = gather.get();
  comm.attach_device(std::move(gather));
  EXPECT_FALSE(comm.broken());
  comm.abandon("rank 0 of 1: a wait did not complete");
  EXPECT_TRUE(comm.broken());
  EXPECT_EQ(g->aborts, 1);
}

}  // namespace
}  // namespace mnemo::test
