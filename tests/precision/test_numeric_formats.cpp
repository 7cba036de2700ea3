// What casting to each format does to a tensor's values (precision/numeric_formats.h), on values placed at the
// formats' edges, and the loss-scale window FP16 gradients leave.
#include <catch2/catch.hpp>

#include <cmath>

#include "precision/numeric_formats.h"

using mpt::precision::NumericFormat;
using mpt::precision::TensorRole;

namespace {

mpt::precision::RangeStats stats_of(std::vector<float> values, NumericFormat format, TensorRole role,
                                    double loss_scale = 1.0) {
  return mpt::precision::range_stats(torch::tensor(values), format, role, /*fp8_margin=*/0, loss_scale);
}

}  // namespace

TEST_CASE("FP8's per-tensor scale flushes what sits 2^10 under the amax and keeps 2^-8 of it subnormal",
          "[fast][numerics]") {
  // scale = 448 / 1: 1e-6 -> 4.5e-4, under half of E4M3's smallest subnormal 2^-9; 1e-5 -> 4.5e-3, subnormal.
  const auto stats = stats_of({1.0f, -1e-6f, 1e-5f, 0.0f, 0.5f}, NumericFormat::kFp8, TensorRole::kInput);
  CHECK(stats.values == 5);
  CHECK(stats.flushed == 1);
  CHECK(stats.subnormal == 1);
  CHECK(stats.saturated == 0);
  CHECK(stats.scale == Approx(448.0));
  CHECK(stats.amax == 1.0);
  // Gradients go to E5M2, whose subnormals reach 2^-16: 1e-6 x 57344 = 0.057 is normal there.
  const auto grads = stats_of({1.0f, 1e-6f}, NumericFormat::kFp8, TensorRole::kGradOutput);
  CHECK(grads.flushed == 0);
  CHECK(grads.subnormal == 0);
  CHECK(grads.scale == Approx(57344.0));
}

TEST_CASE("FP16 overflows past 65520 and flushes under 2^-25, and its loss scale window brackets both",
          "[fast][numerics]") {
  const auto plain = stats_of({70000.0f, 1e-9f, 1e-6f, 1.0f}, NumericFormat::kFp16, TensorRole::kInput);
  CHECK(plain.saturated == 1);
  CHECK(plain.flushed == 1);
  CHECK(plain.subnormal == 1);  // 1e-6 < 2^-14
  // Gradients are multiplied by the loss scale first: 1e-9 x 1024 = 1e-6 survives as a subnormal.
  const auto scaled = stats_of({1.0f, 1e-9f}, NumericFormat::kFp16, TensorRole::kGradOutput, 1024.0);
  CHECK(scaled.flushed == 0);
  CHECK(scaled.subnormal == 1);
  const auto window =
      mpt::precision::fp16_loss_scale_window(stats_of({1.0f, 1e-9f}, NumericFormat::kFp16, TensorRole::kGradOutput));
  CHECK(window.without_overflow == 32768.0);  // 2^15 x 1 < 65504 < 2^16
  CHECK(window.without_flush == 64.0);        // 2^-24 / 1e-9 = 59.6 -> 2^6
}

TEST_CASE("MXFP8 scales each block of 32 by itself: an outlier costs only its own block", "[fast][numerics]") {
  torch::Tensor x = torch::full({64}, 1e-3f);
  x[0] = 1e4f;  // block 0: 1e-3 sits 2^-23 under the outlier, flushed; block 1 is untouched
  const auto stats = mpt::precision::range_stats(x, NumericFormat::kMxfp8, TensorRole::kInput, 0, 1.0);
  CHECK(stats.flushed == 31);
  CHECK(stats.subnormal == 0);
  // A block whose amax lands in [480, 512) x its scale saturates (OCP MX's floor rule): 1.9 x 2^8 = 486.
  const auto saturating =
      mpt::precision::range_stats(torch::tensor({1.9f, 1.0f}), NumericFormat::kMxfp8, TensorRole::kInput, 0, 1.0);
  CHECK(saturating.saturated == 1);
  CHECK(mpt::precision::parse_formats("fp8,bf16,fp8", "--formats").size() == 2);
}
