// The loss scaler's state machine (PyTorch's rule) and its unscale/overflow check.
#include <catch2/catch.hpp>

#include <limits>

#include "precision/loss_scaler.h"

using namespace mpt::precision;

namespace {

LossScaleConfig dynamic(int64_t interval) {
  LossScaleConfig config;
  config.mode = LossScaleMode::kDynamic;
  config.init = 32768.0;
  config.growth_interval = interval;
  return config;
}

std::vector<double> trace(LossScaler& scaler, const std::vector<bool>& overflow) {
  std::vector<double> scales;
  for (bool o : overflow) scales.push_back(scaler.update(o).new_scale);
  return scales;
}

}  // namespace

TEST_CASE("a known sequence of clean and overflowing steps gives the known scales", "[fast][precision]") {
  LossScaler scaler(dynamic(3));
  // clean, clean, clean (grow), inf (back off), clean, inf, inf, clean x3 (grow)
  const std::vector<bool> overflow = {false, false, false, true, false, true, true, false, false, false};
  const std::vector<double> expected = {32768, 32768, 65536, 32768, 32768, 16384, 8192, 8192, 8192, 16384};
  for (size_t i = 0; i < overflow.size(); ++i) {
    scaler.update(overflow[i]);
    CHECK(scaler.scale() == expected[i]);
  }
  CHECK(scaler.state().backoffs == 3);
  CHECK(scaler.state().growths == 2);
  CHECK(scaler.state().lowest_scale == 8192);
}

TEST_CASE("the seed's defaults: x2 after 2000 clean steps, x0.5 on overflow", "[fast][precision]") {
  LossScaler scaler(LossScaleConfig{});
  for (int i = 0; i < 1999; ++i) CHECK(scaler.update(false).change == ScaleChange::kNone);
  ScaleUpdate growth = scaler.update(false);
  CHECK(growth.change == ScaleChange::kGrowth);
  CHECK(growth.old_scale == 32768);
  CHECK(growth.new_scale == 65536);
  ScaleUpdate backoff = scaler.update(true);
  CHECK(backoff.change == ScaleChange::kBackoff);
  CHECK(backoff.new_scale == 32768);
  CHECK(scaler.state().growth_tracker == 0);
}

TEST_CASE("static and none never change the scale", "[fast][precision]") {
  LossScaleConfig config = dynamic(1);
  config.mode = LossScaleMode::kStatic;
  LossScaler fixed(config);
  fixed.update(true);
  fixed.update(false);
  CHECK(fixed.scale() == 32768);
  config.mode = LossScaleMode::kNone;
  LossScaler none(config);
  CHECK(none.scale() == 1.0);
  CHECK(none.update(true).change == ScaleChange::kNone);
}

TEST_CASE("the scale never grows into infinity", "[fast][precision]") {
  LossScaleConfig config = dynamic(1);
  config.init = std::numeric_limits<double>::max();
  LossScaler scaler(config);
  CHECK(scaler.update(false).change == ScaleChange::kNone);
  CHECK(scaler.scale() == std::numeric_limits<double>::max());
}

TEST_CASE("state round-trips: a restored scaler continues the same sequence", "[fast][precision]") {
  LossScaler original(dynamic(4));
  for (bool o : {false, false, true, false, false}) original.update(o);
  LossScaler restored(dynamic(4));
  restored.load_state(original.state());
  for (bool o : {false, false, false, true, false}) {
    CHECK(restored.update(o).new_scale == original.update(o).new_scale);
    CHECK(restored.state().growth_tracker == original.state().growth_tracker);
  }
}

TEST_CASE("unscale divides by the scale and reports Inf and NaN", "[fast][precision]") {
  LossScaler scaler(dynamic(2000));
  auto a = torch::full({3}, 32768.0f), b = torch::full({2, 2}, 65536.0f);
  CHECK_FALSE(scaler.unscale_and_check({a, b}));
  CHECK(a.allclose(torch::ones({3})));
  CHECK(b.allclose(torch::full({2, 2}, 2.0f)));
  auto c = torch::ones({4});
  c[2] = std::numeric_limits<float>::infinity();
  CHECK(scaler.unscale_and_check({a, c}));
  auto d = torch::ones({4});
  d[0] = std::numeric_limits<float>::quiet_NaN();
  CHECK(scaler.unscale_and_check({d}));
  CHECK(scaler.scale_loss(torch::ones({})).item<double>() == 32768.0);
}

TEST_CASE("reference trace: PyTorch GradScaler's sequence (no floor, no ceiling)", "[fast][precision]") {
  LossScaleConfig config = dynamic(2);
  config.init = 65536.0;  // torch.amp.GradScaler's default
  config.min_scale = 0.0;
  config.max_scale = std::numeric_limits<double>::infinity();
  LossScaler scaler(config);
  // _amp_update_scale_: inf -> scale*0.5, tracker 0; else tracker+1, and at `interval` grow and reset.
  CHECK(trace(scaler, {false, false, true, false, false, false, false, true, true, false, false}) ==
        std::vector<double>{65536, 131072, 65536, 65536, 131072, 131072, 262144, 131072, 65536, 65536, 131072});
}

TEST_CASE("reference trace: DeepSpeed's hysteresis absorbs an overflow until the next growth", "[fast][precision]") {
  LossScaleConfig config = dynamic(2);
  config.init = 65536.0;
  config.hysteresis = 2;
  LossScaler scaler(config);
  // DeepSpeed DynamicLossScaler(delayed_shift=2, consecutive_hysteresis=False, scale_window=2).
  CHECK(trace(scaler, {false, false, true, true, false, true, false, false, true, false}) ==
        std::vector<double>{65536, 131072, 131072, 65536, 65536, 32768, 32768, 65536, 65536, 65536});
  CHECK(scaler.state().backoffs == 2);
  CHECK(scaler.state().hysteresis_left == 1);
}

TEST_CASE("the scale stays within its floor and ceiling", "[fast][precision]") {
  LossScaleConfig config = dynamic(1);
  config.init = 4.0;
  config.min_scale = 2.0;
  config.max_scale = 8.0;
  LossScaler scaler(config);
  CHECK(trace(scaler, {true, true, true, false, false, false}) == std::vector<double>{2, 2, 2, 4, 8, 8});
  CHECK(scaler.state().backoffs == 1);  // no backoff event at the floor,
  CHECK(scaler.state().growths == 2);   // no growth event at the ceiling
}

TEST_CASE("consecutive overflows at the floor mean the scale has collapsed", "[fast][precision]") {
  LossScaleConfig config = dynamic(100);
  config.init = 4.0;
  config.min_scale = 1.0;
  config.max_overflows_at_min = 3;
  LossScaler scaler(config);
  trace(scaler, {true, true, true, true});  // 4 -> 2 -> 1, then two overflows at the floor
  CHECK_FALSE(scaler.collapsed());
  scaler.update(false);  // a clean step resets the count
  trace(scaler, {true, true});
  CHECK_FALSE(scaler.collapsed());
  scaler.update(true);
  CHECK(scaler.collapsed());
}
