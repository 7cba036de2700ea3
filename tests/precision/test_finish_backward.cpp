// Finishing the backward: each path's verdict, factor, norm and scale update, and the loss scale a skipped step
// leaves in its gradients (the diagnosis reports magnitudes without it).
#include <catch2/catch.hpp>

#include <limits>

#include "precision/diagnosis.h"
#include "precision/finish_backward.h"

using namespace mpt::precision;

namespace {

LossScaleConfig dynamic_at(double scale) {
  LossScaleConfig config;
  config.init = scale;
  config.growth_interval = 1000;
  return config;
}

}  // namespace

TEST_CASE("finishing the backward: one-pass, single pass and tensor paths agree on verdict, norm and scale",
          "[fast][precision]") {
  for (const bool deferred : {true, false}) {
    CAPTURE(deferred);
    LossScaler scaler(dynamic_at(1024.0));
    auto finish = [&](const std::vector<torch::Tensor>& grads) {
      return deferred ? finish_for_one_pass(grads, scaler, /*max_norm=*/1.0) : finish_in_place(grads, scaler, 1.0);
    };
    std::vector<torch::Tensor> grads = {torch::full({4}, 1024.0f * 3.0f), torch::full({3}, 1024.0f * 4.0f)};
    const FinishedBackward clean = finish(grads);
    CHECK_FALSE(clean.skip);
    const double norm = std::sqrt(4 * 9.0 + 3 * 16.0);
    CHECK(clean.grad_norm.item<double>() == Approx(norm));
    CHECK(clean.scale_update.change == ScaleChange::kNone);
    if (deferred) {  // the optimizer multiplies as it reads: unscale and clip in one factor, nothing written
      CHECK(clean.grad_factor == Approx(1.0 / 1024.0 / (norm + 1e-6)));
      CHECK(grads[0][0].item<float>() == 1024.0f * 3.0f);
      CHECK(clean.grads_scaled_by == 1024.0);
    } else {
      CHECK(clean.grad_factor == 1.0);
      CHECK(grads[0][0].item<float>() == Approx(3.0 / (norm + 1e-6)));
      CHECK(clean.grads_scaled_by == 1.0);
    }

    std::vector<torch::Tensor> overflow = {torch::full({4}, 1024.0f * 2.0f), torch::full({3}, 1.0f)};
    overflow[1][0] = std::numeric_limits<float>::infinity();
    const FinishedBackward skipped = finish(overflow);
    CHECK(skipped.skip);
    CHECK(skipped.scale_update.change == ScaleChange::kBackoff);
    CHECK(skipped.scale_update.old_scale == 1024.0);
    CHECK(scaler.scale() == 512.0);
    CHECK(skipped.grads_scaled_by == 1024.0);  // left as they were: still scaled

    // The diagnosis divides by what is still in them: |g| = 2, not 2048.
    torch::OrderedDict<std::string, torch::Tensor> named;
    for (int i = 0; i < 2; ++i) {
      torch::Tensor holder = torch::zeros(overflow[i].sizes());
      holder.mutable_grad() = overflow[i].clone();
      named.insert("p" + std::to_string(i), holder);
    }
    named["p0"].mutable_grad()[0] = std::numeric_limits<float>::infinity();
    const auto culprits = find_nonfinite_grads(named, 3, skipped.grads_scaled_by);
    REQUIRE(culprits.size() == 2);
    CHECK(culprits[0].max_abs_finite == Approx(2.0));
  }
}

TEST_CASE("across ranks the overflow and stop flags are agreed with one all-reduce", "[fast][precision]") {
  LossScaler scaler(dynamic_at(256.0));
  int reduces = 0;
  const AgreeMax agree = [&](torch::Tensor& flags) {
    ++reduces;
    flags = torch::maximum(flags, torch::tensor({1.0f, 0.0f}));  // another rank overflowed
  };
  std::vector<torch::Tensor> grads = {torch::full({5}, 256.0f)};
  const FinishedBackward done = finish_across_ranks(grads, scaler, /*max_norm=*/0.0, agree, /*stop_requested=*/true);
  CHECK(reduces == 1);
  CHECK(done.skip);
  CHECK(done.stop_agreed);
  CHECK_FALSE(done.grad_norm.defined());
  CHECK(scaler.scale() == 128.0);
}

TEST_CASE("the diverged advice suggests FP32 only for layers that do not compute in it already", "[fast][precision]") {
  const std::vector<NonfiniteGrad> culprits = {
      {"hidden.0.weight", 3, 0.5}, {"head.weight", 1, 0.1}, {"head.bias", 1, 0.1}};
  const std::string advice =
      divergence_advice(culprits, [](const std::string& parameter) { return parameter.rfind("head.", 0) == 0; });
  CHECK(advice ==
        "Keeping hidden.0 in FP32 (add to precision.fp32_modules), lowering the learning rate or clipping gradients "
        "(train.grad_clip_norm) can help. Layers already computing in FP32 (head) gain nothing from a wider dtype: "
        "lower the learning rate or clip gradients (train.grad_clip_norm)");
  CHECK_THAT(divergence_advice({}, nullptr), Catch::StartsWith("Lowering the learning rate"));
}
