// Learning-rate schedules (see schedule.h).
#include "train/config/schedule.h"

#include <cmath>

namespace mnemo {

double learning_rate(const OptimizerConfig& o, const ScheduleConfig& s, int64_t step, int64_t total_steps) {
  double lr = o.lr;
  if (s.type == "step") {
    for (int64_t m : s.milestones)
      if (step >= m) lr *= s.gamma;
  } else if (s.type == "cosine") {
    const double t = total_steps > 0 ? std::min(1.0, static_cast<double>(step) / static_cast<double>(total_steps)) : 0.0;
    lr = s.min_lr + (o.lr - s.min_lr) * 0.5 * (1.0 + std::cos(M_PI * t));
  }
  if (step < s.warmup_steps) lr *= static_cast<double>(step + 1) / static_cast<double>(s.warmup_steps);
  return lr;
}

}  // namespace mnemo
