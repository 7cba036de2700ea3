// The single-pass unscale, overflow check and clip against the separate steps it replaces: LibTorch's
// division, isfinite and clip_grad_norm_.
#include <catch2/catch.hpp>

#include <limits>

#include "ops/gradient_check.h"

using namespace mpt::ops;

namespace {

// Gradients of several sizes (one over the parallel grain, one with a tail shorter than a vector), scaled.
std::vector<torch::Tensor> scaled_gradients(double scale) {
  torch::manual_seed(3);
  return {torch::randn({300, 700}) * scale, torch::randn({13}) * scale, torch::randn({64, 3, 3, 3}) * scale,
          torch::randn({1}) * scale};
}

std::vector<torch::Tensor> clones(const std::vector<torch::Tensor>& grads) {
  std::vector<torch::Tensor> out;
  for (const auto& g : grads) out.push_back(g.clone());
  return out;
}

// LibTorch's way, as the trainer does it in more than one pass.
double reference_unscale_and_clip(std::vector<torch::Tensor>& grads, double scale, double max_norm) {
  std::vector<torch::Tensor> params;
  for (auto& g : grads) {
    g.div_(scale);
    auto p = torch::zeros_like(g).requires_grad_();
    p.mutable_grad() = g;
    params.push_back(p);
  }
  return torch::nn::utils::clip_grad_norm_(params, max_norm);
}

}  // namespace

TEST_CASE("the global norm matches LibTorch's", "[fast][precision]") {
  const auto grads = scaled_gradients(1.0);
  std::vector<torch::Tensor> norms;
  for (const auto& g : grads) norms.push_back(g.norm());
  const double expected = torch::stack(norms).norm().item<double>();
  CHECK(global_l2_norm(grads) == Approx(expected).epsilon(1e-6));
}

TEST_CASE("unscale and clip in one pass equal division then clip_grad_norm_", "[fast][precision]") {
  const double scale = 32768.0;
  for (double max_norm : {1.0, 1e6, 0.0}) {
    CAPTURE(max_norm);
    auto grads = scaled_gradients(scale);
    auto expected = clones(grads);
    const GradientCheck check = unscale_check_and_clip(grads, scale, max_norm);
    REQUIRE_FALSE(check.nonfinite);
    if (max_norm > 0) {
      const double reference_norm = reference_unscale_and_clip(expected, scale, max_norm);
      CHECK(check.norm == Approx(reference_norm).epsilon(1e-6));
    } else {
      for (auto& g : expected) g.div_(scale);
    }
    for (size_t i = 0; i < grads.size(); ++i) CHECK(torch::allclose(grads[i], expected[i], 1e-6, 1e-9));
  }
  // 1.0 clips these gradients (norm ~ 480); 1e6 leaves them at the unscaled values.
  auto grads = scaled_gradients(scale);
  CHECK(unscale_check_and_clip(grads, scale, 1.0).norm > 1.0);
  CHECK(global_l2_norm(grads) == Approx(1.0).epsilon(1e-5));
}

TEST_CASE("clip_grad_norm clips as clip_grad_norm_ does, and its norm stays a tensor", "[fast][precision]") {
  for (double max_norm : {1.0, 1e6}) {
    CAPTURE(max_norm);
    auto grads = scaled_gradients(1.0);
    grads.push_back(torch::randn({40, 9}).to(torch::kBFloat16));  // master_weights' gradients may be BF16
    auto expected = clones(grads);
    const torch::Tensor norm = clip_grad_norm(grads, max_norm);
    CHECK(norm.dim() == 0);
    CHECK(norm.scalar_type() == torch::kFloat);
    const double reference_norm = reference_unscale_and_clip(expected, 1.0, max_norm);
    CHECK(norm.item<double>() == Approx(reference_norm).epsilon(1e-6));
    for (size_t i = 0; i < grads.size(); ++i) {
      CAPTURE(i);
      CHECK(grads[i].scalar_type() == expected[i].scalar_type());
      if (max_norm > reference_norm)
        CHECK(grads[i].equal(expected[i]));  // a factor of exactly 1
      else
        CHECK(torch::allclose(grads[i].to(torch::kFloat), expected[i].to(torch::kFloat), 1e-5, 1e-7));
    }
    if (max_norm < reference_norm) CHECK(global_l2_norm(grads) == Approx(max_norm).epsilon(1e-3));
  }
  std::vector<torch::Tensor> none;
  CHECK(clip_grad_norm(none, 1.0).item<double>() == 0.0);
}

TEST_CASE("a single Inf or NaN anywhere is found and the gradients are left alone", "[fast][precision]") {
  for (float bad : {std::numeric_limits<float>::infinity(), -std::numeric_limits<float>::infinity(),
                    std::numeric_limits<float>::quiet_NaN()}) {
    for (size_t which : {0u, 1u, 3u}) {
      CAPTURE(bad, which);
      auto grads = scaled_gradients(1024.0);
      grads[which].view(-1)[grads[which].numel() - 1].fill_(bad);
      const auto before = clones(grads);
      CHECK(unscale_check_and_clip(grads, 1024.0, 1.0).nonfinite);
      CHECK(torch::allclose(grads[0], before[0], 0.0, 0.0, /*equal_nan=*/true));
    }
  }
}

TEST_CASE("large finite gradients are not mistaken for an overflow", "[fast][precision]") {
  // Squares of 1e30 overflow FP32 (3.4e38) but not the double sum.
  std::vector<torch::Tensor> grads = {torch::full({1000}, 1e30f)};
  const GradientCheck check = unscale_check_and_clip(grads, 1.0, 0.0);
  CHECK_FALSE(check.nonfinite);
  CHECK(check.norm == Approx(1e30 * std::sqrt(1000.0)).epsilon(1e-6));
}

TEST_CASE("only dense FP32 or BF16 CPU gradients take the single pass", "[fast][precision]") {
  CHECK(single_pass_applies({torch::ones({4}), torch::ones({2, 3}).t(), torch::ones({4}, torch::kBFloat16)}));
  CHECK_FALSE(single_pass_applies({torch::ones({4}), torch::ones({4}, torch::kHalf)}));
  CHECK_FALSE(single_pass_applies({torch::ones({4, 4}).slice(1, 0, 2)}));
  CHECK_FALSE(single_pass_applies({torch::ones({4, 4}).to_sparse()}));
}

TEST_CASE("BF16 gradients are checked as their exact FP32 values, and check_gradients writes nothing",
          "[fast][precision]") {
  const double scale = 32768.0;
  std::vector<torch::Tensor> bf16, widened;
  for (const auto& g : scaled_gradients(scale)) {
    bf16.push_back(g.to(torch::kBFloat16));
    widened.push_back(bf16.back().to(torch::kFloat));  // BF16 -> FP32 is exact
  }
  CHECK(global_l2_norm(bf16) == global_l2_norm(widened));
  const auto before = clones(bf16);
  const GradientCheck check = check_gradients(bf16, scale, 1.0);
  const GradientCheck applied = unscale_check_and_clip(widened, scale, 1.0);
  CHECK_FALSE(check.nonfinite);
  CHECK(check.norm == applied.norm);
  CHECK(check.factor < 1.0 / scale);  // clipped: a norm of ~480 down to 1
  for (size_t i = 0; i < bf16.size(); ++i) {
    CHECK(bf16[i].equal(before[i]));
    // The factor is what the one-pass write applied.
    CHECK(torch::allclose(before[i].to(torch::kFloat) * check.factor, widened[i], 1e-6, 0.0));
  }

  // An Inf in a BF16 tail (past the last full vector of a block) is found.
  bf16[1].view(-1)[12].fill_(std::numeric_limits<float>::infinity());
  CHECK(check_gradients(bf16, scale, 0.0).nonfinite);
}
