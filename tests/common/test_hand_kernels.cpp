// The switch over the hand-written kernels: with it, each op takes LibTorch's path and gives the same results, so
// every kernel can be run and measured both ways (MPT_PORTABLE_KERNELS=1, scripts/bench_kernels.sh).
#include <catch2/catch.hpp>

#include "core/common/hand_kernels.h"
#include "core/precision/gradient_check.h"
#include "core/train/fused_optimizers.h"
#include "models/linear.h"
#include "tests/support/helpers.h"

namespace {

struct Portable {  // restores the hand kernels even when a REQUIRE throws
  explicit Portable(bool portable) { mpt::force_portable_kernels(portable); }
  ~Portable() { mpt::force_portable_kernels(false); }
};

// linear's output and gradients, and three fused Adam steps, under the switch's setting.
std::vector<torch::Tensor> run_ops(bool portable) {
  Portable setting(portable);
  torch::manual_seed(8);
  const torch::Tensor x = torch::randn({64, 96}, torch::requires_grad());
  const torch::Tensor w = torch::randn({48, 96}, torch::requires_grad()), b = torch::randn({48}, torch::requires_grad());
  CHECK(mpt::models::splits_linear_backward(x, w) == (!portable && at::get_num_threads() > 1));
  const torch::Tensor y = mpt::models::linear(x, w, b);
  y.pow(2).sum().backward();
  std::vector<torch::Tensor> grads = {x.grad().clone(), w.grad().clone()};
  CHECK(mpt::precision::single_pass_applies(grads) == !portable);

  std::vector<torch::Tensor> parameters = {torch::randn({300, 70}).requires_grad_()};
  mpt::train::FusedAdam adam(parameters, torch::optim::AdamOptions(1e-2));
  for (int step = 0; step < 3; ++step) {
    adam.zero_grad();
    (parameters[0].pow(2) * 0.3).sum().backward();
    adam.step();
  }
  return {y.detach(), x.grad(), w.grad(), b.grad(), parameters[0].detach().clone()};
}

}  // namespace

TEST_CASE("MPT_PORTABLE_KERNELS sends every op to LibTorch's path with the same results", "[fast][common]") {
  mpt::testing::with_threads(2, [] {
    const std::vector<torch::Tensor> hand = run_ops(/*portable=*/false);
    const std::vector<torch::Tensor> portable = run_ops(/*portable=*/true);
    for (size_t i = 0; i < hand.size(); ++i) {
      INFO("result " << i);
      CHECK(torch::allclose(hand[i], portable[i], 1e-5, 1e-5));
    }
  });
}
