// The models the mirror-planner tests plan and run (tests/mirror_planner_test.cpp,
// tests/budget_planner_test.cpp): small ResNets (plain and channel-blocked), LSTMs (fine-grained
// and fused cells, and the fused head), a generic DAG and zoo networks at small inputs; and one training step of a
// plan, its outputs compared bitwise across modes.
#pragma once
#include <string>
#include <vector>

#include "memory/mirror_planner.h"
#include "test_util.h"
#include "train/session/pipeline.h"

namespace mnemo::test {

Config small_resnet();
Config small_lstm();
Config small_lstm_fused();
Config small_lstm_fused_head();  // model.head: fused
// kModels[i] names model_config(i).
extern const std::vector<std::string> kModels;
Config model_config(int i);

struct Outputs {
  // loss, every gradient (no update) or every parameter and velocity after the update, then the
  // running statistics after the step
  std::vector<Tensor> values;
};
// One step of `mr`'s plan on fixed inputs (with the SGD update when the plan has one).
Outputs step(const Config& c, const Pipeline& p, const MirrorResult& mr);

}  // namespace mnemo::test
