// Executor: a short loop over the schedule; all pointer work happens once, in prepare().
#include "core/executor.h"

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>

namespace mnemo {

void Executor::Release::operator()(char* p) const {
  if (device) device->release(p);
  else std::free(p);
}

Executor::Executor(const Graph& g, MemoryPlan plan, Device* device)
    : g_(g), plan_(std::move(plan)), device_(device), arena_(nullptr, Release{device}) {
  MNEMO_CHECK(plan_.entries.size() == g.size() && plan_.workspace.size() == g.size())
      << "memory plan covers " << plan_.entries.size() << " nodes, graph has " << g.size();
#ifndef NDEBUG
  validate_plan(g, plan_, device);
#endif
  // Kernels first: a node without a kernel on this device fails before any memory is taken.
  kernels_.assign(g.size(), nullptr);
  for (size_t i = 0; i < g.size(); ++i) {
    const Node& n = g.node(static_cast<int>(i));
    if (n.op->kind != OpKind::compute) continue;
    kernels_[i] = device ? device->kernel(g, static_cast<int>(i)) : n.op->cpu;
    MNEMO_CHECK(kernels_[i]) << "node '" << n.name << "' (" << n.op->name << ") has no CPU kernel";
  }
  arena_bytes_ = plan_.arena_bytes;
  if (arena_bytes_ > 0) {
    void* p = device ? device->allocate(align_up(arena_bytes_), "the step arena")
                     : std::aligned_alloc(kArenaAlignment, static_cast<size_t>(align_up(arena_bytes_)));
    MNEMO_CHECK(p) << "cannot allocate the " << arena_bytes_ << "-byte arena";
    arena_.reset(static_cast<char*>(p));
  }
  out_.resize(g.size());
  in_.resize(g.size());
  for (size_t i = 0; i < g.size(); ++i) {
    const Node& n = g.node(static_cast<int>(i));
    MNEMO_CHECK(plan_.entries[i].size() == n.outputs.size()) << "memory plan: node '" << n.name << "' outputs";
    out_[i].resize(n.outputs.size());
    for (size_t j = 0; j < n.outputs.size(); ++j) {
      out_[i][j].type = n.outputs[j];
      if (n.op->kind != OpKind::compute) continue;
      const Slot& s = plan_.entries[i][j];
      MNEMO_CHECK(s.offset >= 0 && s.offset + static_cast<int64_t>(n.outputs[j].bytes()) <= arena_bytes_)
          << "memory plan: entry " << n.name << ":" << j << " is not inside the arena";
      out_[i][j].data = arena_.get() + s.offset;
    }
    if (n.op->kind == OpKind::compute) compute_.push_back(static_cast<int>(i));
    if (n.is(OpKind::input) || n.is(OpKind::param)) bound_.push_back(static_cast<int>(i));
  }
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
  MNEMO_CHECK(v.type == n.outputs[0]) << "bind: node '" << n.name << "' expects " << n.outputs[0].str()
                                      << ", got " << v.type.str();
  MNEMO_CHECK(v.data || v.bytes() == 0) << "bind: node '" << n.name << "' bound to null";
  out_[id][0] = v;
  prepared_ = false;
}

void Executor::prepare() {
  for (size_t i = 0; i < g_.size(); ++i) {
    const Node& n = g_.node(static_cast<int>(i));
    if ((n.is(OpKind::input) || n.is(OpKind::param)) && !out_[i][0].data && out_[i][0].bytes())
      MNEMO_FAIL() << "run: " << n.op->name << " node '" << n.name << "' (" << n.outputs[0].str()
                   << ") is not bound";
    in_[i].clear();
    for (const EntryRef& e : n.inputs) in_[i].push_back(out_[e.node][e.index]);
    if (n.is(OpKind::view)) out_[i][0].data = in_[i][0].data;  // alias, same bytes
  }
  prepared_ = true;
}

void Executor::run() {
  if (!prepared_) prepare();
  // The first run is never captured: libraries initialise lazily on first use (module loading,
  // cuBLAS/cuDNN setup), which a capturing stream does not allow.
  if (!capture_ || !device_ || !profile_.empty() || runs_++ == 0) return run_nodes();
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

void Executor::run_nodes() {
  for (int id : compute_) {
    const Slot& ws = plan_.workspace[id];
    KernelContext ctx{in_[id], out_[id], g_.node(id).params.get(),
                      ws.bytes ? arena_.get() + ws.offset : nullptr, static_cast<size_t>(ws.bytes),
                      device_ ? device_->kernel_context() : nullptr};
    try {
      if (profile_.empty()) {
        kernels_[id](ctx);
      } else {
        const auto t0 = std::chrono::steady_clock::now();
        kernels_[id](ctx);
        if (device_) device_->synchronize();  // per-node times on a device: one node at a time
        profile_[id] += std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
      }
    } catch (const Error& e) {
      throw Error("running node '" + g_.node(id).name + "' (" + g_.node(id).op->name + "): " + e.what());
    }
  }
  for (const StateUpdate& u : g_.state_updates) {
    const TensorView& dst = out_[u.param][0];
    const TensorView& src = out_[u.value.node][u.value.index];
    MNEMO_CHECK(dst.type == src.type) << "state update of '" << g_.node(u.param).name << "': type mismatch";
    if (device_) device_->copy(dst.data, src.data, static_cast<int64_t>(dst.bytes()), CopyKind::device_to_device);
    else std::memcpy(dst.data, src.data, dst.bytes());
  }
}

Tensor Executor::fetch(EntryRef e) const {
  const TensorView v = entry(e);
  Tensor t(v.type);
  if (!v.bytes()) return t;
  if (device_) device_->copy(t.data(), v.data, static_cast<int64_t>(v.bytes()), CopyKind::device_to_host);
  else std::memcpy(t.data(), v.data, v.bytes());
  return t;
}

TensorView Executor::entry(EntryRef e) const {
  MNEMO_CHECK(e.node >= 0 && e.node < static_cast<int>(out_.size()) && e.index < static_cast<int>(out_[e.node].size()))
      << "executor: no entry " << e.node << ":" << e.index;
  return out_[e.node][e.index];
}

}  // namespace mnemo
