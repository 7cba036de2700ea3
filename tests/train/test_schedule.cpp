// LR schedules as functions of applied steps, and the linear scaling rule.
#include <catch2/catch.hpp>

#include "train/schedule.h"

using namespace mpt::train;

TEST_CASE("warmup rises linearly from lr/W to the peak", "[fast][train]") {
  ScheduleConfig config;
  config.peak_lr = 1.0;
  config.warmup_steps = 4;
  config.total_steps = 100;
  CHECK(learning_rate(config, 0) == Approx(0.25));
  CHECK(learning_rate(config, 3) == Approx(1.0));
  CHECK(learning_rate(config, 50) == Approx(1.0));  // constant after warmup
}

TEST_CASE("cosine and linear decay reach min_lr_ratio at the end", "[fast][train]") {
  ScheduleConfig config;
  config.peak_lr = 2.0;
  config.warmup_steps = 10;
  config.total_steps = 110;
  config.min_lr_ratio = 0.1;
  config.name = "cosine";
  CHECK(learning_rate(config, 10) == Approx(2.0));
  CHECK(learning_rate(config, 60) == Approx(2.0 * (0.1 + 0.9 * 0.5)));
  CHECK(learning_rate(config, 110) == Approx(0.2));
  config.name = "linear";
  CHECK(learning_rate(config, 60) == Approx(2.0 * 0.55));
  CHECK(learning_rate(config, 110) == Approx(0.2));
}

TEST_CASE("step decay multiplies by gamma every step_size steps", "[fast][train]") {
  ScheduleConfig config;
  config.name = "step";
  config.peak_lr = 1.0;
  config.step_size = 10;
  config.gamma = 0.5;
  config.total_steps = 100;
  CHECK(learning_rate(config, 9) == Approx(1.0));
  CHECK(learning_rate(config, 10) == Approx(0.5));
  CHECK(learning_rate(config, 35) == Approx(0.125));
}

TEST_CASE("the linear scaling rule scales lr and warmup with the global batch", "[fast][train]") {
  ScaledLr scaled = apply_linear_scaling(1e-3, 100, /*global_batch=*/128, /*base_batch_size=*/32);
  CHECK(scaled.lr == Approx(4e-3));  // the seed's example: bs 32 -> 128, lr 1e-3 -> 4e-3
  CHECK(scaled.warmup_steps == 400);
  ScaledLr off = apply_linear_scaling(1e-3, 100, 128, 0);
  CHECK(off.lr == 1e-3);
  CHECK(off.warmup_steps == 100);
}
