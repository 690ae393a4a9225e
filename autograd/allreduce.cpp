// The gradient all-reduce pass (see allreduce.h).
#include "autograd/allreduce.h"

#include <algorithm>
#include <numeric>
#include <string>

namespace mnemo {

bool is_bucket_start(const Node& n) { return n.op->name == "grad_allreduce_start"; }

int64_t bucket_bytes_for(int64_t grad_bytes, int64_t configured) {
  if (configured > 0) return configured;
  constexpr int64_t kMiB = int64_t{1} << 20;
  return std::clamp((grad_bytes + 3) / 4, kMiB, 25 * kMiB);
}

std::string describe_buckets(const TrainingGraph& tg, int64_t configured) {
  int buckets = 0;
  int64_t grad_bytes = 0;
  for (const Node& n : tg.graph.nodes())
    buckets += is_bucket_start(n);
  for (const ParamGrad& pg : tg.grads) grad_bytes += static_cast<int64_t>(tg.graph.type(pg.grad).bytes());
  return std::to_string(buckets) + " bucket(s) of at most " + std::to_string(bucket_bytes_for(grad_bytes, configured)) + " bytes (" +
         std::to_string(grad_bytes) + " bytes of gradients; parallel.bucket_bytes: " +
         (configured > 0 ? std::to_string(configured) : std::string("auto")) + ")";
}

int64_t gather_fingerprint(const TrainingGraph& tg) {
  uint64_t h = 1469598103934665603ull;  // FNV-1a over the buckets' byte counts
  auto mix = [&](uint64_t v) {
    for (int i = 0; i < 8; ++i) h = (h ^ ((v >> (8 * i)) & 0xff)) * 1099511628211ull;
  };
  for (int v = 0; v < static_cast<int>(tg.graph.size()); ++v) {
    const Node& n = tg.graph.node(v);
    if (is_bucket_start(n)) mix(static_cast<uint64_t>(n.outputs[0].bytes()));
  }
  return static_cast<int64_t>(h & 0xffffff);
}

void add_gradient_allreduce(TrainingGraph& tg, int ranks, int64_t bucket_bytes) {
  MNEMO_ASSERT(ranks >= 1 && bucket_bytes >= 0) << "add_gradient_allreduce: ranks " << ranks << ", bucket_bytes " << bucket_bytes;
  MNEMO_ASSERT(tg.lr < 0) << "add_gradient_allreduce: runs before the optimiser updates";
  if (tg.grads.empty()) return;
  const Graph& old = tg.graph;
  const int n = static_cast<int>(old.size());
  std::vector<TensorType> gtype;  // (read now: the nodes are moved below)
  for (const ParamGrad& pg : tg.grads) gtype.push_back(old.type(pg.grad));
  int64_t grad_bytes = 0;
  for (const TensorType& t : gtype) grad_bytes += static_cast<int64_t>(t.bytes());
  bucket_bytes = bucket_bytes_for(grad_bytes, bucket_bytes);
  // Gradients in the order the schedule completes them (their producers; ties in grads order).
  std::vector<size_t> order(tg.grads.size());
  std::iota(order.begin(), order.end(), size_t{0});
  std::stable_sort(order.begin(), order.end(), [&](size_t a, size_t b) { return tg.grads[a].grad.node < tg.grads[b].grad.node; });
  std::vector<std::vector<size_t>> buckets;
  int64_t filled = 0;
  for (size_t k : order) {
    const TensorType& t = gtype[k];
    const int64_t bytes = static_cast<int64_t>(t.bytes());
    if (buckets.empty() || filled + bytes > bucket_bytes || gtype[buckets.back().front()].dtype != t.dtype) {
      buckets.emplace_back();
      filled = 0;
    }
    buckets.back().push_back(k);
    filled += bytes;
  }
  std::vector<int> done(buckets.size());  // the node completing each bucket
  for (size_t b = 0; b < buckets.size(); ++b) {
    done[b] = -1;
    for (size_t k : buckets[b]) done[b] = std::max(done[b], tg.grads[k].grad.node);
  }

  TrainingGraph out;
  Graph& g = out.graph;
  g.reserve(static_cast<size_t>(n) + 2 * buckets.size());
  std::vector<int> new_id(n, -1);
  auto remap = [&](EntryRef e) { return EntryRef{new_id[e.node], e.index}; };
  std::vector<EntryRef> reduced(tg.grads.size());
  std::vector<EntryRef> buffer(buckets.size());
  auto mark = [&](int id, size_t b) {
    Node& node = g.node(id);
    node.role = NodeRole::backward;
    node.source = tg.grads[buckets[b].front()].param;
  };
  auto wait = [&](size_t b) {
    std::vector<int64_t> ndims, dims;
    for (size_t k : buckets[b]) {
      const Shape& s = gtype[k].shape;
      ndims.push_back(static_cast<int64_t>(s.size()));
      dims.insert(dims.end(), s.begin(), s.end());
    }
    const int w = g.add("grad_allreduce_wait", {buffer[b]}, {{"ndims", ndims}, {"dims", dims}},
                        "allreduce/bucket" + std::to_string(b) + "/wait");
    mark(w, b);
    for (size_t j = 0; j < buckets[b].size(); ++j) reduced[buckets[b][j]] = {w, static_cast<int>(j)};
  };
  size_t next = 0;  // the next bucket to start
  for (int v = 0; v < n; ++v) {
    Node node = std::move(tg.graph.node(v));  // (moved: the old graph is replaced below)
    for (EntryRef& e : node.inputs) e = remap(e);
    new_id[v] = g.push(std::move(node));
    for (; next < buckets.size() && done[next] == v; ++next) {
      if (next > 0) wait(next - 1);
      std::vector<EntryRef> in;
      for (size_t k : buckets[next]) in.push_back(remap(tg.grads[k].grad));
      const int s = g.add("grad_allreduce_start", in, {{"ranks", int64_t{ranks}}}, "allreduce/bucket" + std::to_string(next) + "/start");
      mark(s, next);
      buffer[next] = {s, 0};
    }
  }
  MNEMO_ASSERT(next == buckets.size()) << "add_gradient_allreduce: a bucket was never completed";
  wait(buckets.size() - 1);
  out.num_forward = tg.num_forward;
  out.loss = remap(tg.loss);
  for (size_t k = 0; k < tg.grads.size(); ++k) out.grads.push_back({new_id[tg.grads[k].param], reduced[k]});
  for (const EntryRef& e : tg.graph.outputs) {
    auto it = std::find_if(tg.grads.begin(), tg.grads.end(), [&](const ParamGrad& pg) { return pg.grad == e; });
    g.outputs.push_back(it == tg.grads.end() ? remap(e) : reduced[static_cast<size_t>(it - tg.grads.begin())]);
  }
  for (const StateUpdate& u : tg.graph.state_updates) g.state_updates.push_back({new_id[u.param], remap(u.value)});
  tg = std::move(out);
}

}  // namespace mnemo
