// masked_scores: mask_bias + scale * (Q K^T) widened to FP32 in one pass, with the matching gradient; and
// attention_probabilities: the scores through the softmax, dropout and the cast in one pass.
#include <catch2/catch.hpp>

#include "ops/attention_scores.h"

#include <limits>

#include "ops/dropout.h"

namespace {

torch::Tensor padding_mask(int64_t batch, int64_t keys) {
  torch::Tensor mask = torch::zeros({batch, 1, 1, keys});
  mask[0][0][0][keys - 1] = -1e9;  // the first sequence's last key is [PAD]
  mask[1][0][0][0] = -1e9;
  return mask;
}

}  // namespace

TEST_CASE("masked_scores adds the per-sequence mask to the scaled products, in FP32, with their gradient",
          "[fast][models]") {
  torch::manual_seed(10);
  const double scale = 0.125;
  const torch::Tensor mask = padding_mask(2, 7);
  const torch::Tensor upstream = torch::randn({2, 3, 7, 7});
  for (const auto dtype : {torch::kFloat, torch::kBFloat16}) {
    const torch::Tensor products = torch::randn({2, 3, 7, 7}).to(dtype).requires_grad_();
    const torch::Tensor fused = mpt::ops::masked_scores(products, mask, scale);
    REQUIRE(fused.scalar_type() == torch::kFloat);
    fused.backward(upstream);
    const torch::Tensor fused_grad = products.grad().clone();
    products.mutable_grad() = torch::Tensor();
    const torch::Tensor reference = torch::add(mask, products, scale);  // LibTorch's promoting add
    reference.backward(upstream);
    CHECK(torch::allclose(fused, reference, /*rtol=*/1e-6, /*atol=*/1e-6));
    // Masked keys: -1e9 in every head and query row of that sequence only.
    CHECK(fused.select(0, 0).select(-1, 6).lt(-1e8).all().item<bool>());
    CHECK(fused.select(0, 1).select(-1, 6).gt(-1e8).all().item<bool>());
    REQUIRE(fused_grad.scalar_type() == dtype);
    CHECK(torch::allclose(fused_grad.to(torch::kFloat), products.grad().to(torch::kFloat), 1e-6, 1e-6));
    CHECK(torch::allclose(fused_grad.to(torch::kFloat), (upstream * scale).to(dtype).to(torch::kFloat), 0, 0));
  }
  // A mask that wants a gradient is not fused: it gets its gradient from the unfused add.
  const torch::Tensor trainable_mask = mask.clone().requires_grad_();
  mpt::ops::masked_scores(torch::randn({2, 3, 7, 7}), trainable_mask, scale).sum().backward();
  REQUIRE(trainable_mask.grad().defined());
  CHECK(trainable_mask.grad().eq(21.0).all().item<bool>());  // 3 heads x 7 query rows per key
}

namespace {

// The unfused chain attention_probabilities stands for.
torch::Tensor unfused_probabilities(const torch::Tensor& products, const torch::Tensor& mask, double scale, double p,
                                    bool training, torch::ScalarType dtype) {
  return mpt::ops::dropout_to(torch::softmax(mpt::ops::masked_scores(products, mask, scale), -1), p, training, dtype);
}

}  // namespace

TEST_CASE("attention_probabilities is masked scores, FP32 softmax, dropout and the cast, with their gradient",
          "[fast][models]") {
  const double scale = 0.125, p = 0.1;
  const torch::Tensor mask = padding_mask(2, 32);  // 32 keys: two vectors per row where the CPU fuses
  for (const auto in_dtype : {torch::kFloat, torch::kBFloat16}) {
    for (const auto out_dtype : {torch::kFloat, torch::kBFloat16}) {
      for (const bool training : {true, false}) {
        CAPTURE(in_dtype, out_dtype, training);
        torch::manual_seed(21);
        const torch::Tensor products = (4 * torch::randn({2, 3, 32, 32})).to(in_dtype).requires_grad_();
        const torch::Tensor upstream = torch::randn({2, 3, 32, 32}).to(out_dtype);

        torch::manual_seed(22);
        const torch::Tensor fused = mpt::ops::attention_probabilities(products, mask, scale, p, training, out_dtype);
        const int64_t after_fused = torch::randint(1 << 30, {1}).item<int64_t>();
        REQUIRE(fused.scalar_type() == out_dtype);
        fused.backward(upstream);
        const torch::Tensor fused_grad = products.grad().clone();
        products.mutable_grad() = torch::Tensor();

        torch::manual_seed(22);
        const torch::Tensor reference = unfused_probabilities(products, mask, scale, p, training, out_dtype);
        CHECK(torch::randint(1 << 30, {1}).item<int64_t>() == after_fused);  // one generator draw each, or none
        reference.backward(upstream);

        // The same mask: dropped exactly where the reference dropped, and [PAD] keys get (almost) nothing.
        CHECK(torch::equal(fused.eq(0), reference.eq(0)));
        if (training) CHECK(fused.eq(0).to(torch::kDouble).mean().item<double>() == Approx(p + 1.0 / 32).margin(0.04));
        CHECK(fused.select(0, 0).select(-1, 31).abs().max().item<float>() < 1e-30f);
        const double value_tolerance = out_dtype == torch::kBFloat16 ? 1e-2 : 1e-5;
        CHECK(torch::allclose(fused.to(torch::kFloat), reference.to(torch::kFloat), value_tolerance, 1e-6));
        REQUIRE(fused_grad.scalar_type() == in_dtype);
        const double grad_tolerance = in_dtype == torch::kBFloat16 ? 1e-2 : 1e-4;
        CHECK(torch::allclose(fused_grad.to(torch::kFloat), products.grad().to(torch::kFloat), grad_tolerance, 1e-5));
      }
    }
  }
}

TEST_CASE("attention_probabilities keeps a NaN in its row and takes the unfused chain for odd shapes",
          "[fast][models]") {
  const torch::Tensor mask = padding_mask(2, 32);
  torch::Tensor products = torch::randn({2, 3, 32, 32});
  products[1][2][5][7] = std::numeric_limits<float>::quiet_NaN();
  const torch::Tensor probs = mpt::ops::attention_probabilities(products, mask, 0.125, 0.0, false, torch::kFloat);
  CHECK(probs[1][2][5].isnan().all().item<bool>());
  CHECK_FALSE(probs[1][2][4].isnan().any().item<bool>());
  CHECK(torch::allclose(probs[0].sum(-1), torch::ones({3, 32}), 1e-5, 1e-5));

  // 7 keys (not a whole vector) and a mask that wants a gradient both take the three ops.
  const torch::Tensor odd = torch::randn({2, 3, 7, 7});
  torch::manual_seed(23);
  const torch::Tensor odd_fused =
      mpt::ops::attention_probabilities(odd, padding_mask(2, 7), 0.5, 0.1, true, torch::kBFloat16);
  torch::manual_seed(23);
  CHECK(torch::equal(odd_fused, unfused_probabilities(odd, padding_mask(2, 7), 0.5, 0.1, true, torch::kBFloat16)));
  const torch::Tensor trainable_mask = mask.clone().requires_grad_();
  mpt::ops::attention_probabilities(products.nan_to_num(), trainable_mask, 0.125, 0.0, true, torch::kFloat)
      .select(-1, 0)
      .sum()
      .backward();
  CHECK(trainable_mask.grad().defined());
}
