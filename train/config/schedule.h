// Learning-rate schedules: a pure function of the step, so a resumed run continues exactly.
//   constant: lr
//   step:     lr * gamma^(number of milestones <= step)
//   cosine:   min_lr + (lr - min_lr) * (1 + cos(pi * step / total)) / 2
// with an optional linear warm-up over the first warmup_steps: lr(step) * (step + 1) / warmup_steps.
#pragma once
#include "train/config/config.h"

namespace mnemo {

double learning_rate(const OptimizerConfig& o, const ScheduleConfig& s, int64_t step, int64_t total_steps);

}  // namespace mnemo
