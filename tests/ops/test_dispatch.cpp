// The switch over the hand-written kernels: with it, each op takes LibTorch's path and gives the same results, so
// every kernel can be run and measured both ways (MPT_PORTABLE_KERNELS=1, scripts/bench_kernels.sh).
#include <catch2/catch.hpp>

#include "ops/attention_scores.h"
#include "ops/dispatch.h"
#include "ops/dropout.h"
#include "ops/fused_batch_norm.h"
#include "ops/fused_optimizers.h"
#include "ops/gelu.h"
#include "ops/gradient_check.h"
#include "ops/layer_norm.h"
#include "ops/linear.h"
#include "tests/support/helpers.h"

namespace {

struct Portable {  // restores the hand kernels even when a REQUIRE throws
  explicit Portable(bool portable) { mpt::ops::force_portable_kernels(portable); }
  ~Portable() { mpt::ops::force_portable_kernels(false); }
};

// linear's output and gradients, and three fused Adam steps, under the switch's setting.
std::vector<torch::Tensor> run_ops(bool portable) {
  Portable setting(portable);
  torch::manual_seed(8);
  const torch::Tensor x = torch::randn({64, 96}, torch::requires_grad());
  const torch::Tensor w = torch::randn({48, 96}, torch::requires_grad()),
                      b = torch::randn({48}, torch::requires_grad());
  CHECK(mpt::ops::splits_linear_backward(x, w) == (!portable && at::get_num_threads() > 1));
  const torch::Tensor y = mpt::ops::linear(x, w, b);
  y.pow(2).sum().backward();
  std::vector<torch::Tensor> grads = {x.grad().clone(), w.grad().clone()};
  CHECK(mpt::ops::single_pass_applies(grads) == !portable);

  std::vector<torch::Tensor> parameters = {torch::randn({300, 70}).requires_grad_()};
  mpt::ops::FusedAdam adam(parameters, torch::optim::AdamOptions(1e-2));
  for (int step = 0; step < 3; ++step) {
    adam.zero_grad();
    (parameters[0].pow(2) * 0.3).sum().backward();
    adam.step();
  }
  return {y.detach(), x.grad(), w.grad(), b.grad(), parameters[0].detach().clone()};
}

}  // namespace

TEST_CASE("MPT_PORTABLE_KERNELS sends every op to LibTorch's path with the same results", "[fast][ops]") {
  mpt::testing::with_threads(2, [] {
    const std::vector<torch::Tensor> hand = run_ops(/*portable=*/false);
    const std::vector<torch::Tensor> portable = run_ops(/*portable=*/true);
    for (size_t i = 0; i < hand.size(); ++i) {
      INFO("result " << i);
      CHECK(torch::allclose(hand[i], portable[i], 1e-5, 1e-5));
    }
  });
}

namespace {

// An op's value and input gradient (for a sum of squares upstream), detached.
template <typename Op>
std::pair<torch::Tensor, torch::Tensor> value_and_grad(const torch::Tensor& input, Op&& op) {
  const torch::Tensor x = input.detach().clone().requires_grad_();
  const torch::Tensor y = op(x);
  y.to(torch::kFloat).pow(2).sum().backward();
  return {y.detach().to(torch::kFloat), x.grad().to(torch::kFloat)};
}

void check_close(const std::pair<torch::Tensor, torch::Tensor>& actual,
                 const std::pair<torch::Tensor, torch::Tensor>& expected, double tolerance) {
  CHECK(torch::allclose(actual.first, expected.first, tolerance, tolerance));
  CHECK(torch::allclose(actual.second, expected.second, tolerance, tolerance));
}

}  // namespace

// Each op, with the hand kernels on and forced off, against the LibTorch composition it replaces. On a CPU
// without AVX512-BF16 the "hand" run of the vectorised ops takes the portable path too; the CPU's own test file
// (test_gelu.cpp, test_layer_norm.cpp, ...) then reports its kernel-only cases skipped.
TEST_CASE("every op matches its LibTorch reference with hand kernels on and off", "[fast][ops]") {
  for (const bool portable : {false, true}) {
    CAPTURE(portable);
    Portable setting(portable);
    torch::manual_seed(21);
    for (const auto dtype : {torch::kFloat, torch::kBFloat16}) {
      CAPTURE(dtype);
      const double tolerance = dtype == torch::kFloat ? 1e-5 : 2e-2;
      const torch::Tensor x = (3 * torch::randn({8, 64})).to(dtype);
      check_close(value_and_grad(x, [](const torch::Tensor& t) { return mpt::ops::gelu(t); }),
                  value_and_grad(x, [](const torch::Tensor& t) { return torch::gelu(t); }), tolerance);
    }

    torch::nn::LayerNorm norm(torch::nn::LayerNormOptions({64}).eps(1e-12));
    const torch::Tensor h = torch::randn({4, 8, 64});
    for (const auto dtype : {torch::kFloat, torch::kBFloat16}) {
      CAPTURE(dtype);
      const auto fused = value_and_grad(h, [&](const torch::Tensor& t) {
        const mpt::ops::NormOutput out = mpt::ops::layer_norm_and_narrow(t, *norm, dtype);
        return out.fp32 + out.narrow.to(torch::kFloat);
      });
      const auto reference = value_and_grad(h, [&](const torch::Tensor& t) {
        const torch::Tensor y = torch::layer_norm(t, {64}, norm->weight, norm->bias, 1e-12);
        return y + y.to(dtype).to(torch::kFloat);
      });
      check_close(fused, reference, dtype == torch::kFloat ? 1e-5 : 2e-2);
    }

    const torch::Tensor products = torch::randn({2, 4, 16, 16}).to(torch::kBFloat16);
    torch::Tensor mask_bias = torch::zeros({2, 1, 1, 16});
    mask_bias.index_put_({1, 0, 0, torch::indexing::Slice(12)}, -1e9);  // the second sequence's last 4 are [PAD]
    const double scale = 0.125;
    check_close(
        value_and_grad(products, [&](const torch::Tensor& p) { return mpt::ops::masked_scores(p, mask_bias, scale); }),
        value_and_grad(products, [&](const torch::Tensor& p) { return mask_bias + scale * p.to(torch::kFloat); }),
        1e-2);
    check_close(
        value_and_grad(products,
                       [&](const torch::Tensor& p) {
                         return mpt::ops::attention_probabilities(p, mask_bias, scale, 0.0, true, torch::kBFloat16);
                       }),
        value_and_grad(products,
                       [&](const torch::Tensor& p) {
                         return torch::softmax(mask_bias + scale * p.to(torch::kFloat), -1).to(torch::kBFloat16);
                       }),
        1e-2);

    // Dropout: whichever mask each way draws, the fused forms equal the unfused ones under the same seed, and
    // a kept element is scaled by 1 / (1 - p).
    const torch::Tensor y = torch::randn({64, 256}), residual = torch::randn({64, 256});
    torch::manual_seed(5);
    const torch::Tensor fused_add = mpt::ops::dropout_add(y, residual, 0.25, true);
    torch::manual_seed(5);
    const torch::Tensor unfused_add = mpt::ops::dropout(y, 0.25, true) + residual;
    CHECK(torch::allclose(fused_add, unfused_add, 1e-6, 1e-6));
    torch::manual_seed(6);
    const torch::Tensor fused_to = mpt::ops::dropout_to(y, 0.25, true, torch::kBFloat16);
    torch::manual_seed(6);
    CHECK(torch::equal(fused_to, mpt::ops::dropout(y, 0.25, true).to(torch::kBFloat16)));
    const torch::Tensor dropped = mpt::ops::dropout(torch::ones({1 << 16}), 0.25, true);
    const double kept = dropped.ne(0).to(torch::kDouble).mean().item<double>();
    CHECK(std::abs(kept - 0.75) < 0.01);
    CHECK(torch::allclose(dropped.index({dropped.ne(0)}), torch::full({1}, 1.0 / 0.75)));

    // Batch norm: the fused kernel takes only BF16 channels-last training on AVX512-BF16, never when forced off.
    torch::nn::BatchNorm2d bn(16);
    const torch::Tensor image =
        torch::randn({2, 16, 4, 4}).to(torch::kBFloat16).contiguous(torch::MemoryFormat::ChannelsLast);
    CHECK(mpt::ops::can_fuse_batch_norm(*bn, image, {}) == (!portable && mpt::ops::avx512_bf16_kernels()));
  }
}

TEST_CASE("the fused optimizers step as LibTorch's do with hand kernels on and off", "[fast][ops]") {
  auto run = [](bool portable, const std::string& which) {
    Portable setting(portable);
    torch::manual_seed(3);
    std::vector<torch::Tensor> parameters = {torch::randn({257, 33}).requires_grad_(),
                                             torch::randn({7}).requires_grad_()};
    std::unique_ptr<torch::optim::Optimizer> optimizer;
    if (which == "sgd")
      optimizer = std::make_unique<mpt::ops::FusedSgd>(
          parameters, torch::optim::SGDOptions(0.1).momentum(0.9).weight_decay(1e-4).nesterov(true));
    else if (which == "adamw")
      optimizer =
          std::make_unique<mpt::ops::FusedAdamW>(parameters, torch::optim::AdamWOptions(1e-2).weight_decay(0.01));
    else
      optimizer = std::make_unique<torch::optim::SGD>(
          parameters, torch::optim::SGDOptions(0.1).momentum(0.9).weight_decay(1e-4).nesterov(true));
    for (int step = 0; step < 4; ++step) {
      optimizer->zero_grad();
      (parameters[0].pow(2).sum() * 0.1 + parameters[1].sin().sum()).backward();
      optimizer->step();
    }
    return torch::cat({parameters[0].detach().flatten(), parameters[1].detach()});
  };
  for (const bool portable : {false, true}) {
    CAPTURE(portable);
    CHECK(torch::allclose(run(portable, "sgd"), run(portable, "libtorch-sgd"), 1e-5, 1e-6));
    const torch::Tensor libtorch_adamw = run(true, "adamw");  // forced off, FusedAdamW is LibTorch's AdamW
    CHECK(torch::allclose(run(portable, "adamw"), libtorch_adamw, 1e-5, 1e-6));
  }
}
