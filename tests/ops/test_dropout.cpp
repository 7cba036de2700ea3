// mpt's counter-based CPU dropout: the right statistics, reproducible from torch's seed, and its gradient.
#include <catch2/catch.hpp>

#include "ops/dropout.h"

TEST_CASE("dropout keeps 1 - p of the elements, scaled, reproducibly, with the matching gradient", "[fast][models]") {
  for (const auto dtype : {torch::kFloat, torch::kBFloat16}) {
    torch::manual_seed(3);
    const torch::Tensor x = torch::ones({1000, 1000}, dtype);
    const torch::Tensor y = mpt::ops::dropout(x, 0.1, /*training=*/true);
    const torch::Tensor kept = y.ne(0);
    CHECK(kept.to(torch::kDouble).mean().item<double>() == Approx(0.9).margin(0.002));  // 1e6 draws: sd 3e-4
    CHECK(y.masked_select(kept)
              .to(torch::kFloat)
              .eq(static_cast<float>(torch::tensor(1.0 / 0.9, dtype).item<float>()))
              .all()
              .item<bool>());
    // Rows and columns are not correlated (a per-row or per-column pattern would show here).
    const torch::Tensor row_rate = kept.to(torch::kDouble).mean(1), column_rate = kept.to(torch::kDouble).mean(0);
    CHECK(row_rate.std().item<double>() < 0.02);
    CHECK(column_rate.std().item<double>() < 0.02);

    torch::manual_seed(3);
    CHECK(torch::equal(mpt::ops::dropout(x, 0.1, true), y));        // the same seed, the same mask
    CHECK_FALSE(torch::equal(mpt::ops::dropout(x, 0.1, true), y));  // the next call draws a new one
  }
  const torch::Tensor x = torch::randn({64, 32}).requires_grad_();
  const torch::Tensor y = mpt::ops::dropout(x, 0.5, true);
  y.sum().backward();
  CHECK(torch::allclose(x.grad(), (y.detach() / x.detach()).nan_to_num(0.0), 1e-5, 1e-6));  // grad = mask * 2
  CHECK(torch::equal(mpt::ops::dropout(x, 0.5, /*training=*/false), x));
}

TEST_CASE("dropout_add is residual + dropout(y): the same mask as dropout, its gradient, BF16 y into FP32",
          "[fast][models]") {
  using mpt::ops::dropout_add;
  auto dropout = [](const torch::Tensor& x, double p, bool training) { return mpt::ops::dropout(x, p, training); };
  torch::manual_seed(4);
  const torch::Tensor residual = torch::randn({8, 16, 96}).requires_grad_();
  const torch::Tensor y = torch::randn({8, 16, 96}).requires_grad_();
  const torch::Tensor upstream = torch::randn({8, 16, 96});

  torch::manual_seed(5);
  const torch::Tensor fused = dropout_add(y, residual, 0.3, /*training=*/true);
  fused.backward(upstream);
  const torch::Tensor fused_grad_y = y.grad().clone(), fused_grad_residual = residual.grad().clone();
  y.mutable_grad() = torch::Tensor(), residual.mutable_grad() = torch::Tensor();
  torch::manual_seed(5);
  const torch::Tensor reference = dropout(y, 0.3, true) + residual;
  reference.backward(upstream);
  CHECK(torch::equal(fused, reference));  // FP32: the same mask, the same arithmetic
  CHECK(torch::equal(fused_grad_y, y.grad()));
  CHECK(torch::equal(fused_grad_residual, residual.grad()));
  const double dropped = fused_grad_y.eq(0).to(torch::kDouble).mean().item<double>();
  CHECK(dropped == Approx(0.3).margin(0.03));

  // BF16 y (a projection under autocast) into the FP32 residual stream: FP32 result, BF16 gradient for y. The
  // fused form widens y exactly and never rounds y * mask to BF16, so it is at least as close to FP32 math.
  const torch::Tensor y16 = y.detach().to(torch::kBFloat16).requires_grad_();
  torch::manual_seed(5);
  const torch::Tensor mixed = dropout_add(y16, residual, 0.3, true);
  REQUIRE(mixed.scalar_type() == torch::kFloat);
  mixed.backward(upstream);
  REQUIRE(y16.grad().scalar_type() == torch::kBFloat16);
  torch::manual_seed(5);
  const torch::Tensor exact = dropout(y16.detach().to(torch::kFloat), 0.3, true) + residual.detach();
  CHECK(torch::allclose(mixed, exact, /*rtol=*/1e-6, /*atol=*/1e-6));
  CHECK(torch::equal(y16.grad(), fused_grad_y.to(torch::kBFloat16)));  // rounded once, to nearest even

  CHECK(torch::equal(dropout_add(y, residual, 0.3, /*training=*/false), y + residual));
  // A broadcast residual is not fusable and takes dropout(y) + residual.
  torch::manual_seed(6);
  const torch::Tensor broadcast = dropout_add(y, residual[0], 0.3, true);
  torch::manual_seed(6);
  CHECK(torch::equal(broadcast, dropout(y, 0.3, true) + residual[0]));
}

TEST_CASE("dropout_to is dropout(x).to(dtype) in one pass: the same mask, values and gradient", "[fast][models]") {
  auto dropout = [](const torch::Tensor& x, double p, bool training) { return mpt::ops::dropout(x, p, training); };
  torch::manual_seed(7);
  const torch::Tensor x = torch::rand({4, 3, 32, 32}).requires_grad_();  // softmax-like probabilities
  const torch::Tensor upstream = torch::randn({4, 3, 32, 32}).to(torch::kBFloat16);

  torch::manual_seed(8);
  const torch::Tensor fused = mpt::ops::dropout_to(x, 0.1, /*training=*/true, torch::kBFloat16);
  REQUIRE(fused.scalar_type() == torch::kBFloat16);
  fused.backward(upstream);
  const torch::Tensor fused_grad = x.grad().clone();
  x.mutable_grad() = torch::Tensor();
  torch::manual_seed(8);
  const torch::Tensor reference = dropout(x, 0.1, true).to(torch::kBFloat16);
  reference.backward(upstream);
  CHECK(torch::equal(fused, reference));
  REQUIRE(fused_grad.scalar_type() == torch::kFloat);
  CHECK(torch::equal(fused_grad, x.grad()));
  CHECK(fused.eq(0).to(torch::kDouble).mean().item<double>() == Approx(0.1).margin(0.01));

  CHECK(torch::equal(mpt::ops::dropout_to(x, 0.1, /*training=*/false, torch::kBFloat16), x.to(torch::kBFloat16)));
  torch::manual_seed(9);
  const torch::Tensor same_dtype = mpt::ops::dropout_to(x, 0.1, true, torch::kFloat);
  torch::manual_seed(9);
  CHECK(torch::equal(same_dtype, dropout(x, 0.1, true)));
}
