// Learning-rate schedules as a pure function of the number of *applied* optimizer updates, so a step skipped
// on overflow never advances the schedule (the fix for pytorch#44511's warning, by construction).
#pragma once

#include <cstdint>
#include <string>

namespace mpt::train {

struct ScheduleConfig {
  std::string name = "constant";  // constant | step | linear | cosine
  double peak_lr = 1e-3;          // after the linear scaling rule
  int64_t warmup_steps = 0;       // after the linear scaling rule
  int64_t step_size = 1000;
  double gamma = 0.1;
  double min_lr_ratio = 0.0;
  int64_t total_steps = 1;      // the run's length in optimizer steps
  int64_t base_batch_size = 0;  // the linear scaling rule's reference batch (0 = off)
};

// LR for the update that follows `applied_steps` earlier applied updates.
double learning_rate(const ScheduleConfig& config, int64_t applied_steps);

// The seed's linear scaling rule: when base_batch_size > 0, lr and warmup scale by global / base.
struct ScaledLr {
  double lr;
  int64_t warmup_steps;
};
ScaledLr apply_linear_scaling(double lr, int64_t warmup_steps, int64_t global_batch, int64_t base_batch_size);

}  // namespace mpt::train
