// The training pipeline's passes (see pipeline.h).
#include "train/session/pipeline.h"

namespace mnemo {

Pipeline build_pipeline(const Config& c, const DataShape& data, int64_t batch, int ranks, bool reduce_one_rank, int rank) {
  MNEMO_CHECK(ranks >= 1) << "ranks must be at least 1, got " << ranks;
  MNEMO_CHECK(rank >= 0 && rank < ranks) << "rank " << rank << " is not one of " << ranks;
  Pipeline p{data, build_model(c, data, batch, true), {}, ranks, reduce_one_rank};
  if (rank > 0) {
    // Rank r holds rows [r * batch, (r + 1) * batch) of the global batch: a dropout input whose
    // first dimension is the batch starts at element r * numel of the global one's. (Where the
    // batch is not the first dimension, e.g. time-major sequences, the ranks' masks still differ,
    // but are not one process's.)
    Graph& g = p.model.builder.graph();
    for (size_t v = 0; v < g.size(); ++v) {
      Node& n = g.node(static_cast<int>(v));
      if (n.op->name != "dropout") continue;
      n.attrs["offset"] = static_cast<int64_t>(rank) * g.type(n.inputs[0]).numel();
      n.params = n.op->parse(n.attrs);
    }
  }
  const Graph& fwd = p.model.builder.graph();
  for (const auto& [name, k] : c.mirror) {
    const int id = fwd.find(name);
    MNEMO_CHECK(id >= 0) << c.file << ": mirror: no node named '" << name << "' in the model";
    p.mirror_overrides[id] = k;
  }
  return p;
}

MirrorResult plan_pipeline(const Config& c, const Pipeline& p, const std::string& mode, const Device* device,
                           bool with_update, std::shared_ptr<BudgetMemo> budget_memo) {
  const SgdSpec sgd{c.optimizer.momentum, c.optimizer.weight_decay, p.ranks, c.parallel.bucket_bytes, p.reduce_one_rank};
  MemoryMode m = parse_memory_mode(mode);
  m.budget_memo = std::move(budget_memo);
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
