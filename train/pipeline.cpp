// The training pipeline's passes (see pipeline.h).
#include "train/pipeline.h"

namespace mnemo {

MirrorPlan config_mirror_plan(const Config& c, const Graph& forward) {
  MirrorPlan m(forward.size(), 0);
  for (const auto& [name, k] : c.mirror) {
    const int id = forward.find(name);
    MNEMO_CHECK(id >= 0) << c.file << ": mirror: no node named '" << name << "' in the model";
    m[id] = k;
  }
  return m;
}

Pipeline build_pipeline(const Config& c, const DataShape& data, int64_t batch) {
  Pipeline p{data, build_model(c, data, batch, true), {}, {}};
  p.mirror = config_mirror_plan(c, p.model.builder.graph());
  p.training = build_training_graph(p.model.builder.graph(), p.model.loss, p.mirror);
  return p;
}

PlannedStep plan_pipeline(const Config& c, const Pipeline& p, AllocMode mode) {
  const int optimizer_state = c.optimizer.momentum > 0 ? 1 : 0;
  return plan_training_step(p.training, mode, optimizer_state);
}

}  // namespace mnemo
