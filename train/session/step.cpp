// A planned step bound to a device, and the evaluator (see step.h).
#include "train/session/step.h"

#include <algorithm>
#include <limits>
#include <cmath>
#include <cstring>
#include <sstream>

#include "ops/softmax_cross_entropy.h"
#include "train/session/preflight.h"

namespace mnemo {

DeviceInputs::~DeviceInputs() {
  for (char* b : buffers_) device_.release(b);
}

std::vector<TensorView> DeviceInputs::put(std::initializer_list<const Tensor*> host) {
  std::vector<TensorView> out;
  size_t i = 0;
  for (const Tensor* t : host) {
    if (device_.host_memory()) {
      out.push_back(t->view());
      continue;
    }
    if (buffers_.size() <= i) buffers_.push_back(static_cast<char*>(device_.allocate(static_cast<int64_t>(t->bytes()), "an input batch")));
    device_.copy(buffers_[i], t->data(), static_cast<int64_t>(t->bytes()), CopyKind::host_to_device);
    out.push_back(TensorView{buffers_[i], t->type()});
    ++i;
  }
  return out;
}

MirrorResult plan_step(const Config& c, const Pipeline& p, Device& device, bool with_update, bool force, int64_t extra) {
  MirrorResult mr = plan_pipeline(c, p, c.memory, &device, with_update);
  check_fits(mr, extra, memory_available(device), c, p, device, force);
  return mr;
}

int64_t batch_bytes(const Pipeline& p, int64_t batches) {
  const Graph& g = p.model.builder.graph();
  const int64_t one = static_cast<int64_t>(g.node(g.find(p.model.data)).outputs[0].bytes() +
                                           g.node(g.find(p.model.labels)).outputs[0].bytes());
  return one * batches;
}

BoundStep::BoundStep(MirrorResult mr, const Pipeline& p, ParamStore& params, Sgd* sgd, Device& device, bool capture)
    : p_(p), device_(device), mr_(std::move(mr)),
      ex_(mr_.training.graph, std::move(mr_.planned.plan), &device), dparams_(device, params, sgd), inputs_(device) {
  MNEMO_ASSERT((mr_.training.lr >= 0) == (sgd != nullptr)) << "a step planned " << (sgd ? "without" : "with")
                                                            << " the optimiser update bound " << (sgd ? "with" : "without") << " one";
  dparams_.bind(ex_);
  if (mr_.training.lr >= 0) {
    const TensorType t = mr_.training.graph.node(mr_.training.lr).outputs[0];
    lr_ = device.allocate(static_cast<int64_t>(t.bytes()), "the learning rate");
    ex_.bind(mr_.training.lr, TensorView{lr_, t});
  }
  if (const int id = mr_.training.graph.find(kRngStep); id >= 0) {  // a model with dropout
    const TensorType t = mr_.training.graph.node(id).outputs[0];
    step_ = device.allocate(static_cast<int64_t>(t.bytes()), "the step counter");
    ex_.bind(kRngStep, TensorView{step_, t});
    set_step(0);
  }
  ex_.set_capture(capture);
}

BoundStep::~BoundStep() {
  device_.release(lr_);
  device_.release(step_);
}

void BoundStep::set_step(int64_t step) {
  if (!step_) return;
  step_host_ = static_cast<int32_t>(step & 0x7fffffff);
  device_.copy(step_, &step_host_, sizeof step_host_, CopyKind::host_to_device);
}

TensorType BoundStep::input_type(const std::string& name) const {
  return mr_.training.graph.node(mr_.training.graph.find(name)).outputs[0];
}

void BoundStep::bind(TensorView x, TensorView y) {
  ex_.bind(p_.model.data, x);
  ex_.bind(p_.model.labels, y);
}

void BoundStep::bind_host(const Tensor& x, const Tensor& y) {
  const std::vector<TensorView> v = inputs_.put({&x, &y});
  bind(v[0], v[1]);
}

void BoundStep::set_lr(double lr) {
  MNEMO_ASSERT(lr_) << "set_lr on a step without an optimiser";
  const TensorType& t = mr_.training.graph.node(mr_.training.lr).outputs[0];
  if (t.dtype == DType::f64) lr_host_[0] = lr;
  else {
    const float f = static_cast<float>(lr);
    std::memcpy(lr_host_, &f, sizeof f);
  }
  device_.copy(lr_, lr_host_, static_cast<int64_t>(t.bytes()), CopyKind::host_to_device);
}

double BoundStep::finish(const std::string& what) {
  const double loss = ex_.fetch(mr_.training.loss).as<float>()[0];
  const int32_t status = mr_.training.status.valid() ? ex_.fetch(mr_.training.status).as<int32_t>()[0] : 0;
  if (std::isfinite(loss) && status == 0) return loss;
  std::ostringstream os;
  os << what << ": ";
  if (!std::isfinite(loss)) {
    os << "the loss is " << loss << " (no parameter was updated)";
  } else {
    const Graph& g = mr_.training.graph;
    const ParamGrad& pg = mr_.training.grads.at(static_cast<size_t>(status - 1));
    os << "the update of parameter '" << g.node(pg.param).name
       << "' met a NaN or Inf (in its gradient, or its new velocity or weight overflowed); it and the later updates "
          "of this step were skipped";
    // The updates scheduled before it have applied: name them (the replay below reads their new values).
    std::vector<std::string> applied;
    for (size_t v = 0; v < g.size(); ++v) {
      const Node& n = g.node(static_cast<int>(v));
      if (!n.op->traits.updates_state) continue;
      if (n.inputs[0].node == pg.param) break;
      applied.push_back(g.node(n.inputs[0].node).name);
    }
    if (!applied.empty()) {
      os << " (" << applied.size() << " earlier update(s) of this step had applied: ";
      for (size_t i = 0; i < applied.size() && i < 5; ++i) os << (i ? ", " : "") << "'" << applied[i] << "'";
      os << (applied.size() > 5 ? ", ...)" : ")");
    }
  }
  fail_non_finite(os.str());
}

void BoundStep::fail_non_finite(const std::string& problem) {
  const Graph& g = mr_.training.graph;
  std::ostringstream os;
  os << problem;
  if (!replay_) {
    os << " (a data-parallel step is not replayed to find the first non-finite value: run the same data on one "
          "process, from the last checkpoint, to locate it)";
    throw Error(os.str());
  }
  const Executor::NonFinite nf = ex_.find_non_finite();
  if (nf.node >= 0) {
    const Node& n = g.node(nf.node);
    const char* kind = n.is(OpKind::input) ? "input" : n.is(OpKind::param) ? "parameter" : nullptr;
    os << "; the first non-finite value ";
    if (kind) os << "is in the " << kind << " '" << n.name << "'";
    else os << "is output " << nf.output << " of node '" << n.name << "' (" << n.op->name << ", " << role_name(n.role) << ")";
    os << ": element " << nf.index << " = " << nf.value;
  } else {
    os << "; replaying the step found no non-finite value (the weights it read changed since)";
  }
  throw Error(os.str());
}

// Scores the first `count` examples of an evaluation batch: the correct predictions (argmax over
// each logits row), the rows scored (added to *scored) and, when `ce_sum` is given, each scored
// row's softmax cross-entropy against its label (the op's row loss), summed in double into *ce_sum.
static int64_t score_batch(const Executor& ex, const BuiltModel& m, const Tensor& labels, int64_t count, int64_t* scored,
                           double* ce_sum) {
  int64_t correct = 0;
  const int32_t* y = labels.as<int32_t>();
  for (size_t t = 0; t < m.all_logits.size(); ++t) {
    const Tensor logits = ex.fetch(m.all_logits[t]);  // a host copy (from the device, when there is one)
    const TensorView lv = logits.view();
    const int64_t n = lv.dim(0), classes = lv.dim(1);
    const float* p = lv.as<float>();
    for (int64_t i = 0; i < count; ++i) {
      const float* row = p + i * classes;
      const float* top = std::max_element(row, row + classes);
      // Labels: [N] for one classifier; [T,N] time-major for per-step classifiers.
      const int32_t label = m.all_logits.size() == 1 ? y[i] : y[t * n + i];
      correct += top - row == label;
      ++*scored;
      // (the label is in range: the graph's own loss node, run on this batch, checked every one)
      if (ce_sum) *ce_sum += ops::softmax_cross_entropy_row(row, classes, label);
    }
  }
  return correct;
}

static bool time_major(const Config& c) { return c.model_type == "lstm"; }

Evaluator::Evaluator(const Config& c, const DataShape& ds, Device& device, const DeviceParams& params, const Executor& lend,
                     bool capture)
    : c_(c),
      m_(build_model(c, ds, c.model_type == "graph" ? c.data.batch : (c.data.eval_batch ? c.data.eval_batch : c.data.batch), false)),
      fg_(m_.builder.graph()), inputs_(device) {
  fg_.outputs = m_.all_logits;
  fg_.outputs.push_back(m_.loss);
  MemoryPlan plan = plan_memory(fg_, AllocMode::share, nullptr, {}, &device);
  const bool fits = plan.arena_bytes <= lend.arena_bytes() && lend.arena();
  ex_ = std::make_unique<Executor>(fg_, std::move(plan), &device, fits ? lend.arena() : nullptr, fits ? lend.arena_bytes() : 0);
  ex_->set_capture(capture);
  params.bind(*ex_);
}

int64_t Evaluator::batch() const { return fg_.type({fg_.find(m_.data), 0}).shape[time_major(c_) ? 1 : 0]; }

Evaluator::Result Evaluator::run(const DataSource& test) {
  int64_t correct = 0, scored = 0;
  double loss_sum = 0;
  int64_t batches = 0, loss_examples = 0;
  const bool tm = time_major(c_);
  const int64_t batch = this->batch();
  // The built-in models' evaluation loss is the mean softmax cross-entropy of their logits' rows
  // (every step's, for per-step classifiers): scored on the host, it covers every example, the
  // partial last batch's too (the graph's loss would average in its padding rows). A graph
  // config's loss can be anything: the graph's, over the full batches.
  const bool rows = c_.model_type != "graph";
  double ce_sum = 0;
  for_each_eval_batch(test, batch, tm, [&](const Tensor& x, const Tensor& y, int64_t count) {
    const std::vector<TensorView> v = inputs_.put({&x, &y});
    ex_->bind(m_.data, v[0]);
    ex_->bind(m_.labels, v[1]);
    ex_->run();
    const int64_t before = scored;
    correct += score_batch(*ex_, m_, y, count, &scored, rows ? &ce_sum : nullptr);
    // (examples as scored: a per-step classifier's predictions, each step's of each sequence)
    if (!rows && count == batch) loss_sum += ex_->fetch(m_.loss).as<float>()[0], ++batches, loss_examples += scored - before;
  });
  const double nan = std::numeric_limits<double>::quiet_NaN();
  const double accuracy = scored ? static_cast<double>(correct) / static_cast<double>(scored) : 0.0;
  if (rows) return {accuracy, scored ? ce_sum / static_cast<double>(scored) : nan, scored, scored};
  return {accuracy, batches ? loss_sum / static_cast<double>(batches) : nan, scored, loss_examples};
}

}  // namespace mnemo
