// Learning-rate schedules: a pure function of the step (0-based) and, for cosine, of the run's
// total steps, so a resumed run with the checkpoint's settings continues exactly (a resume with
// other settings, a cosine's total among them, is named in a note: the checkpoint records them).
//   constant: lr
//   step:     lr * gamma^(number of milestones <= step)
//   cosine:   min_lr + (lr - min_lr) * (1 + cos(pi * step / total)) / 2: lr at step 0, min_lr at
//             step `total`, one past the last (PyTorch's CosineAnnealingLR with T_max = total)
// times an optional linear warm-up over the first warmup_steps: (step + 1) / warmup_steps (the
// factor multiplies the schedule's value at that step, as PyTorch's LambdaLR composed with it).
#pragma once
#include <string>

#include "train/config/config.h"

namespace mnemo {

double learning_rate(const OptimizerConfig& o, const ScheduleConfig& s, int64_t step, int64_t total_steps);
// The optimiser settings and schedule that learning_rate and the update read, in words (e.g. "sgd lr
// 0.05 momentum 0.9 weight_decay 0.0005, schedule cosine to min_lr 0.001 over 12 steps, warm-up 3
// steps"): checkpoints record it, and a resume with other settings names both.
std::string describe_training(const OptimizerConfig& o, const ScheduleConfig& s, int64_t total_steps);

}  // namespace mnemo
