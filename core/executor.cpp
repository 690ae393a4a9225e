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
  kernels_ = plan_.kernels;
  for (size_t i = 0; i < g.size(); ++i) {
    const Node& n = g.node(static_cast<int>(i));
    if (n.op->kind != OpKind::compute) continue;
    MNEMO_ASSERT(kernels_[i].run) << "node '" << n.name << "' (" << n.op->name << ") has no prepared kernel";
    MNEMO_ASSERT(kernels_[i].workspace <= static_cast<size_t>(plan_.workspace[i].bytes))
        << "node '" << n.name << "' needs " << kernels_[i].workspace << " workspace bytes, the plan reserves "
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
  out_.resize(g.size());
  in_.resize(g.size());
  for (size_t i = 0; i < g.size(); ++i) {
    const Node& n = g.node(static_cast<int>(i));
    MNEMO_ASSERT(plan_.entries[i].size() == n.outputs.size()) << "memory plan: node '" << n.name << "' outputs";
    out_[i].resize(n.outputs.size());
    for (size_t j = 0; j < n.outputs.size(); ++j) {
      out_[i][j].type = n.outputs[j];
      if (n.op->kind != OpKind::compute || aliased_input(n, j)) continue;
      const Slot& s = plan_.entries[i][j];
      MNEMO_ASSERT(s.offset >= 0 && s.offset + static_cast<int64_t>(n.outputs[j].bytes()) <= arena_bytes_)
          << "memory plan: entry " << n.name << ":" << j << " is not inside the arena";
      out_[i][j].data = arena_.get() + s.offset;
    }
    if (n.op->kind == OpKind::compute) compute_.push_back(static_cast<int>(i));
    if (n.is(OpKind::input) || n.is(OpKind::param)) {
      bound_.push_back(static_cast<int>(i));
      if (n.outputs[0].bytes()) ++unbound_;
    }
  }
  // Inputs resolved once; who reads each entry, and which outputs alias it (views, state updated
  // in place), so that bind() can update exactly those.
  readers_.resize(g.size());
  aliases_.resize(g.size());
  for (size_t i = 0; i < g.size(); ++i) {
    readers_[i].resize(out_[i].size());
    aliases_[i].resize(out_[i].size());
  }
  for (size_t i = 0; i < g.size(); ++i) {
    const Node& n = g.node(static_cast<int>(i));
    for (size_t k = 0; k < n.inputs.size(); ++k) {
      const EntryRef e = n.inputs[k];
      in_[i].push_back(out_[e.node][e.index]);
      readers_[e.node][e.index].push_back({static_cast<int>(i), static_cast<int>(k)});
    }
    for (size_t j = 0; j < n.outputs.size(); ++j)
      if (const std::optional<EntryRef> in = aliased_input(n, j)) {
        aliases_[in->node][in->index].push_back({static_cast<int>(i), static_cast<int>(j)});
        out_[i][j].data = out_[in->node][in->index].data;
      }
  }
}

void Executor::set_address(int node, int output, void* data) {
  out_[node][output].data = data;
  for (const auto& [reader, slot] : readers_[node][output]) in_[reader][slot].data = data;
  for (const auto& [alias, j] : aliases_[node][output]) set_address(alias, j, data);
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
  if (!out_[id][0].data && v.bytes()) --unbound_;
  set_address(id, 0, v.data);
}

void Executor::check_bound() const {
  if (unbound_ == 0) return;
  for (int id : bound_) {
    const Node& n = g_.node(id);
    if (!out_[id][0].data && out_[id][0].bytes())
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
  for (int id : bound_) key.push_back(out_[id][0].data);
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
  const PreparedKernel& k = kernels_[id];
  KernelContext ctx{in_[id], out_[id], g_.node(id).params.get(), ws.bytes ? arena_.get() + ws.offset : nullptr,
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
    const TensorView& dst = out_[u.param][0];
    const TensorView& src = out_[u.value.node][u.value.index];
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
  MNEMO_ASSERT(e.node >= 0 && e.node < static_cast<int>(out_.size()) && e.index < static_cast<int>(out_[e.node].size()))
      << "executor: no entry " << e.node << ":" << e.index;
  return out_[e.node][e.index];
}

}  // namespace mnemo
