// Executor: a short loop over the schedule; all pointer work happens once, in the constructor;
// bind() only swaps the addresses a bound node's readers see.
#include "core/executor.h"

#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>

namespace mnemo {

void Executor::Release::operator()(char* p) const {
  if (owned) device->release(p);
}

Executor::Executor(const Graph& g, MemoryPlan plan, Device* device, char* arena, int64_t arena_bytes)
    : g_(g), plan_(std::move(plan)), device_(&device_or_cpu(device)), arena_(nullptr, Release{device_, arena == nullptr}) {
  MNEMO_ASSERT(plan_.entries.size() == g.size() && plan_.workspace.size() == g.size())
      << "memory plan covers " << plan_.entries.size() << " nodes, graph has " << g.size();
#ifndef NDEBUG
  validate_plan(g, plan_, device);
#endif
  // Kernels first (the plan's, prepared for this device when it was made): a node without a
  // kernel on this device fails before any memory is taken.
  if (plan_.kernels.size() != g.size()) plan_.kernels = prepare_kernels(g, device_);
  for (size_t i = 0; i < g.size(); ++i) {
    const Node& n = g.node(static_cast<int>(i));
    if (n.op->kind != OpKind::compute) continue;
    MNEMO_ASSERT(plan_.kernels[i].run) << "node '" << n.name << "' (" << n.op->name << ") has no prepared kernel";
    MNEMO_ASSERT(plan_.kernels[i].workspace <= static_cast<size_t>(plan_.workspace[i].bytes))
        << "node '" << n.name << "' needs " << plan_.kernels[i].workspace << " workspace bytes, the plan reserves "
        << plan_.workspace[i].bytes;
  }
  arena_bytes_ = plan_.arena_bytes;
  owns_arena_ = arena == nullptr;
  if (arena) {
    MNEMO_ASSERT(arena_bytes >= arena_bytes_) << "a lent arena of " << arena_bytes << " bytes for a plan of " << arena_bytes_;
    arena_.reset(arena);
  } else if (arena_bytes_ > 0) {
    arena_.reset(static_cast<char*>(device_->allocate(align_up(arena_bytes_), "the step arena")));
  }
  // The tables are flat arrays indexed through per-node offsets, not vectors per node: a training
  // graph of 10^4 nodes would otherwise hold some 10^5 small allocations (megabytes of host memory
  // the plan does not count).
  out_begin_.resize(g.size() + 1);
  in_begin_.resize(g.size() + 1);
  for (size_t i = 0; i < g.size(); ++i) {
    const Node& n = g.node(static_cast<int>(i));
    MNEMO_ASSERT(plan_.entries[i].size() == n.outputs.size()) << "memory plan: node '" << n.name << "' outputs";
    out_begin_[i + 1] = out_begin_[i] + static_cast<int>(n.outputs.size());
    in_begin_[i + 1] = in_begin_[i] + static_cast<int>(n.inputs.size());
  }
  out_.resize(static_cast<size_t>(out_begin_.back()));
  in_.resize(static_cast<size_t>(in_begin_.back()));
  for (size_t i = 0; i < g.size(); ++i) {
    const Node& n = g.node(static_cast<int>(i));
    for (size_t j = 0; j < n.outputs.size(); ++j) {
      TensorView& v = out_[static_cast<size_t>(out_begin_[i]) + j];
      v.type = n.outputs[j];
      if (n.op->kind != OpKind::compute || aliased_input(n, j)) continue;
      const Slot& s = plan_.entries[i][j];
      MNEMO_ASSERT(s.offset >= 0 && s.offset + static_cast<int64_t>(n.outputs[j].bytes()) <= arena_bytes_)
          << "memory plan: entry " << n.name << ":" << j << " is not inside the arena";
      v.data = arena_.get() + s.offset;
    }
    if (n.op->kind == OpKind::compute) compute_.push_back(static_cast<int>(i));
    if (n.is(OpKind::input) || n.is(OpKind::param)) {
      bound_.push_back(static_cast<int>(i));
      if (n.outputs[0].bytes()) ++unbound_;
    }
  }
  // Inputs resolved once; who reads each entry, and which outputs alias it (views, state updated
  // in place), so that bind() can update exactly those: per output entry, a range of input slots
  // (readers) and of output entries (aliases), counted first, then filled.
  readers_begin_.assign(out_.size() + 1, 0);
  aliases_begin_.assign(out_.size() + 1, 0);
  for (size_t i = 0; i < g.size(); ++i) {
    const Node& n = g.node(static_cast<int>(i));
    for (const EntryRef& e : n.inputs) ++readers_begin_[static_cast<size_t>(flat(e)) + 1];
    for (size_t j = 0; j < n.outputs.size(); ++j)
      if (const std::optional<EntryRef> in = aliased_input(n, j)) ++aliases_begin_[static_cast<size_t>(flat(*in)) + 1];
  }
  for (size_t k = 0; k < out_.size(); ++k) {
    readers_begin_[k + 1] += readers_begin_[k];
    aliases_begin_[k + 1] += aliases_begin_[k];
  }
  readers_.resize(static_cast<size_t>(readers_begin_.back()));
  aliases_.resize(static_cast<size_t>(aliases_begin_.back()));
  std::vector<int> readers_filled(readers_begin_.begin(), readers_begin_.end() - 1);
  std::vector<int> aliases_filled(aliases_begin_.begin(), aliases_begin_.end() - 1);
  for (size_t i = 0; i < g.size(); ++i) {
    const Node& n = g.node(static_cast<int>(i));
    for (size_t k = 0; k < n.inputs.size(); ++k) {
      const int e = flat(n.inputs[k]);
      const int slot = in_begin_[i] + static_cast<int>(k);
      in_[static_cast<size_t>(slot)] = out_[static_cast<size_t>(e)];
      readers_[static_cast<size_t>(readers_filled[static_cast<size_t>(e)]++)] = slot;
    }
    for (size_t j = 0; j < n.outputs.size(); ++j)
      if (const std::optional<EntryRef> in = aliased_input(n, j)) {
        const int e = flat(*in), a = out_begin_[i] + static_cast<int>(j);
        aliases_[static_cast<size_t>(aliases_filled[static_cast<size_t>(e)]++)] = a;
        out_[static_cast<size_t>(a)].data = out_[static_cast<size_t>(e)].data;
      }
  }
}

void Executor::set_address(int e, void* data) {
  out_[static_cast<size_t>(e)].data = data;
  for (int k = readers_begin_[static_cast<size_t>(e)]; k < readers_begin_[static_cast<size_t>(e) + 1]; ++k)
    in_[static_cast<size_t>(readers_[static_cast<size_t>(k)])].data = data;
  for (int k = aliases_begin_[static_cast<size_t>(e)]; k < aliases_begin_[static_cast<size_t>(e) + 1]; ++k)
    set_address(aliases_[static_cast<size_t>(k)], data);
}

Executor::~Executor() = default;

void Executor::bind(const std::string& name, TensorView v) {
  const int id = g_.find(name);
  MNEMO_CHECK(id >= 0) << "bind: the graph has no node named '" << name << "'";
  bind(id, v);
}

void Executor::bind(int id, TensorView v) {
  const Node& n = g_.node(id);
  MNEMO_CHECK(n.is(OpKind::input) || n.is(OpKind::param))
      << "bind: node '" << n.name << "' is a " << n.op->name << " node, not an input or param";
  MNEMO_CHECK(v.type == n.outputs[0]) << "the " << n.op->name << " node '" << n.name << "' expects " << n.outputs[0].str()
                                      << ", got " << v.type.str();
  MNEMO_CHECK(v.data || v.bytes() == 0) << "bind: node '" << n.name << "' bound to null";
  if (!out_[static_cast<size_t>(out_begin_[id])].data && v.bytes()) --unbound_;
  set_address(out_begin_[id], v.data);
}

void Executor::check_bound() const {
  if (unbound_ == 0) return;
  for (int id : bound_) {
    const Node& n = g_.node(id);
    const TensorView& v = out_[static_cast<size_t>(out_begin_[id])];
    if (!v.data && v.bytes())
      MNEMO_FAIL() << "run: " << n.op->name << " node '" << n.name << "' (" << n.outputs[0].str() << ") is not bound";
  }
}

void Executor::run() {
  check_bound();
  // The first run is never captured: libraries initialise lazily on first use (module loading,
  // cuBLAS/cuDNN setup), which a capturing stream does not allow.
  if (!capture_ || !profile_.empty() || runs_++ == 0) return run_nodes();
  // A captured step holds the addresses it was recorded with: key the graphs by the bound ones.
  std::vector<void*> key;
  key.reserve(bound_.size());
  for (int id : bound_) key.push_back(out_[static_cast<size_t>(out_begin_[id])].data);
  auto it = graphs_.find(key);
  if (it == graphs_.end()) {
    if (graphs_.size() >= 8) graphs_.clear();  // bindings that keep changing: record afresh
    std::shared_ptr<void> graph;
    try {
      graph = device_->capture([this] { run_nodes(); });
    } catch (const Error& e) {
      std::fprintf(stderr, "mnemo: warning: capturing the step on %s failed, running node by node: %s\n",
                   device_->name().c_str(), e.what());
    }
    if (!graph) {
      capture_ = false;
      return run_nodes();
    }
    ++captures_;
    it = graphs_.emplace(std::move(key), std::move(graph)).first;
  }
  device_->replay(it->second.get());
}

void Executor::run_node(int id) {
  const Slot& ws = plan_.workspace[id];
  const PreparedKernel& k = plan_.kernels[static_cast<size_t>(id)];
  const std::span<const TensorView> in(in_.data() + in_begin_[id], in_.data() + in_begin_[id + 1]);
  const std::span<const TensorView> out(out_.data() + out_begin_[id], out_.data() + out_begin_[id + 1]);
  KernelContext ctx{in, out, g_.node(id).params.get(), ws.bytes ? arena_.get() + ws.offset : nullptr,
                    static_cast<size_t>(ws.bytes), device_->kernel_context(), k.state.get()};
  try {
    k.run(ctx);
  } catch (const Error& e) {
    throw Error("running node '" + g_.node(id).name + "' (" + g_.node(id).op->name + "): " + e.what());
  }
}

void Executor::run_nodes() {
  for (int id : compute_) {
    if (profile_.empty()) {
      run_node(id);
    } else {
      const auto t0 = std::chrono::steady_clock::now();
      run_node(id);
      device_->synchronize();  // per-node times on a device: one node at a time
      profile_[id] += std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    }
  }
  for (const StateUpdate& u : g_.state_updates) {
    const TensorView& dst = out_[static_cast<size_t>(out_begin_[u.param])];
    const TensorView& src = out_[static_cast<size_t>(flat(u.value))];
    MNEMO_ASSERT(dst.type == src.type) << "state update of '" << g_.node(u.param).name << "': type mismatch";
    device_->copy(dst.data, src.data, static_cast<int64_t>(dst.bytes()), CopyKind::device_to_device);
  }
}

Executor::NonFinite Executor::find_non_finite() {
  check_bound();
  auto scan = [&](int id, int j) -> NonFinite {
    if (!is_float(g_.node(id).outputs[j].dtype)) return {};
    const Tensor t = fetch({id, j});
    for (int64_t i = 0; i < t.numel(); ++i) {
      const double x = t.dtype() == DType::f32 ? static_cast<double>(t.as<float>()[i]) : t.as<double>()[i];
      if (!std::isfinite(x)) return {id, j, i, x};
    }
    return {};
  };
  // The data and the weights first; not the targets of state updates (running statistics), which
  // the run that failed may have overwritten and which no training-mode node reads.
  std::vector<bool> state(g_.size(), false);
  for (const StateUpdate& u : g_.state_updates) state[u.param] = true;
  for (int id : bound_)
    if (!state[id])
      if (NonFinite f = scan(id, 0); f.node >= 0) return f;
  for (int id : compute_) {
    const Node& n = g_.node(id);
    if (n.op->traits.updates_state) continue;
    run_node(id);
    for (size_t j = 0; j < n.outputs.size(); ++j)
      if (NonFinite f = scan(id, static_cast<int>(j)); f.node >= 0) return f;
  }
  return {};
}

Tensor Executor::fetch(EntryRef e) const {
  const TensorView v = entry(e);
  Tensor t(v.type);
  if (v.bytes()) device_->copy(t.data(), v.data, static_cast<int64_t>(v.bytes()), CopyKind::device_to_host);
  return t;
}

TensorView Executor::entry(EntryRef e) const {
  MNEMO_ASSERT(e.node >= 0 && e.node < static_cast<int>(g_.size()) && e.index >= 0 &&
               e.index < out_begin_[static_cast<size_t>(e.node) + 1] - out_begin_[static_cast<size_t>(e.node)])
      << "executor: no entry " << e.node << ":" << e.index;
  return out_[static_cast<size_t>(flat(e))];
}

}  // namespace mnemo
