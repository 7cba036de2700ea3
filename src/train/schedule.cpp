// LR schedules: linear warmup from 0, then constant, step decay, linear or cosine decay to min_lr_ratio.
#include "train/schedule.h"

#include <algorithm>
#include <cmath>

namespace mpt::train {

double learning_rate(const ScheduleConfig& config, int64_t applied_steps) {
  const int64_t s = applied_steps;
  if (s < config.warmup_steps) return config.peak_lr * static_cast<double>(s + 1) / config.warmup_steps;
  const int64_t since_warmup = s - config.warmup_steps;
  const int64_t decay_steps = std::max<int64_t>(1, config.total_steps - config.warmup_steps);
  const double progress = std::min(1.0, static_cast<double>(since_warmup) / decay_steps);
  const double floor = config.min_lr_ratio;
  double factor = 1.0;
  if (config.name == "step")
    factor = std::pow(config.gamma, static_cast<double>(since_warmup / config.step_size));
  else if (config.name == "linear")
    factor = 1.0 - (1.0 - floor) * progress;
  else if (config.name == "cosine")
    factor = floor + (1.0 - floor) * 0.5 * (1.0 + std::cos(M_PI * progress));
  return config.peak_lr * factor;
}

ScaledLr apply_linear_scaling(double lr, int64_t warmup_steps, int64_t global_batch, int64_t base_batch_size) {
  if (base_batch_size <= 0) return {lr, warmup_steps};
  const double k = static_cast<double>(global_batch) / base_batch_size;
  return {lr * k, static_cast<int64_t>(std::llround(warmup_steps * k))};
}

}  // namespace mpt::train
