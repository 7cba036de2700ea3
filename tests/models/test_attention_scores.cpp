// masked_scores: mask_bias + scale * (Q K^T) widened to FP32 in one pass, with the matching gradient.
#include <catch2/catch.hpp>

#include "models/attention_scores.h"

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
    const torch::Tensor fused = mpt::models::masked_scores(products, mask, scale);
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
  mpt::models::masked_scores(torch::randn({2, 3, 7, 7}), trainable_mask, scale).sum().backward();
  REQUIRE(trainable_mask.grad().defined());
  CHECK(trainable_mask.grad().eq(21.0).all().item<bool>());  // 3 heads x 7 query rows per key
}
