// The training pipeline, one pass after another (STYLE.md rule 4):
//   config -> forward graph (models/) -> mirror plan (config's per-node `mirror`) ->
//   training graph + schedule (autograd/) -> memory plan (memory/) -> executor (core/).
// Each function requires the product of the one before and returns plain data.
#pragma once
#include "autograd/gradient.h"
#include "memory/report.h"
#include "train/config.h"

namespace mnemo {

// m(v) from the config's per-node mirror counts (0 elsewhere); an unknown node name is an error.
MirrorPlan config_mirror_plan(const Config& c, const Graph& forward);

struct Pipeline {
  DataShape data;
  BuiltModel model;
  MirrorPlan mirror;
  TrainingGraph training;
};

Pipeline build_pipeline(const Config& c, const DataShape& data, int64_t batch);

// One memory plan + report per mode for the pipeline's training graph.
PlannedStep plan_pipeline(const Config& c, const Pipeline& p, AllocMode mode);

}  // namespace mnemo
