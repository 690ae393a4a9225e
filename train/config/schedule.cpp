// Learning-rate schedules (see schedule.h).
#include "train/config/schedule.h"

#include <charconv>
#include <cmath>
#include <sstream>

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

// The shortest text that reads back as `v` (0.05, not 0.050000000000000003): exact, and as written.
static std::string shortest(double v) {
  char buf[32];
  const auto r = std::to_chars(buf, buf + sizeof buf, v);
  return std::string(buf, r.ptr);
}

std::string describe_training(const OptimizerConfig& o, const ScheduleConfig& s, int64_t total_steps) {
  std::ostringstream d;
  d << o.type << " lr " << shortest(o.lr) << " momentum " << shortest(o.momentum) << " weight_decay " << shortest(o.weight_decay)
    << ", schedule " << s.type;
  if (s.type == "step") {
    d << " x" << shortest(s.gamma) << " at steps";
    for (int64_t m : s.milestones) d << " " << m;
  } else if (s.type == "cosine") {
    d << " to min_lr " << shortest(s.min_lr) << " over " << total_steps << " steps";
  }
  if (s.warmup_steps) d << ", warm-up " << s.warmup_steps << " steps";
  return d.str();
}

}  // namespace mnemo
