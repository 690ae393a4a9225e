// The training pipeline's passes (see pipeline.h).
#include "train/session/pipeline.h"

namespace mnemo {

Pipeline build_pipeline(const Config& c, const DataShape& data, int64_t batch, int ranks, bool reduce_one_rank) {
  MNEMO_CHECK(ranks >= 1) << "ranks must be at least 1, got " << ranks;
  Pipeline p{data, build_model(c, data, batch, true), {}, ranks, reduce_one_rank};
  const Graph& fwd = p.model.builder.graph();
  for (const auto& [name, k] : c.mirror) {
    const int id = fwd.find(name);
    MNEMO_CHECK(id >= 0) << c.file << ": mirror: no node named '" << name << "' in the model";
    p.mirror_overrides[id] = k;
  }
  return p;
}

MirrorResult plan_pipeline(const Config& c, const Pipeline& p, const std::string& mode, const Device* device,
                           bool with_update) {
  const SgdSpec sgd{c.optimizer.momentum, c.optimizer.weight_decay, p.ranks, c.parallel.bucket_bytes, p.reduce_one_rank};
  MemoryMode m = parse_memory_mode(mode);
  m.order = parse_schedule_order(c.order);
  m.placement_seconds = c.placement_seconds;
  try {
    return plan_mirror(p.model.builder.graph(), p.model.loss, m, p.mirror_overrides, with_update ? &sgd : nullptr, device);
  } catch (const NodeError& e) {
    // A graph config's node the passes refused (e.g. one the gradient pass cannot go through),
    // with its file and line.
    if (c.model_type != "graph") throw;
    throw Error(graph_node_where(c.graph, e));
  }
}

}  // namespace mnemo
