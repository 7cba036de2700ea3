// layer_norm_and_narrow: torch::layer_norm in FP32 plus its output in the compute dtype, with both gradients.
#include <catch2/catch.hpp>

#include "ops/layer_norm.h"
#include "tests/support/helpers.h"

namespace {

torch::nn::LayerNorm trained_norm(int64_t hidden) {
  torch::nn::LayerNorm norm(torch::nn::LayerNormOptions({hidden}).eps(1e-12));
  torch::NoGradGuard no_grad;
  norm->weight.uniform_(0.5, 1.5);  // not the identity, so a gradient that skips the weight is caught
  norm->bias.uniform_(-0.5, 0.5);
  return norm;
}

struct Gradients {
  torch::Tensor x, weight, bias;
};

// Backward of a * out.fp32 + b * out.narrow summed against fixed upstreams; a or b 0 leaves that path unused.
Gradients gradients(torch::nn::LayerNorm& norm, const torch::Tensor& x, bool fused, bool through_fp32,
                    bool through_narrow) {
  const torch::Tensor input = x.detach().clone().requires_grad_();
  norm->zero_grad();
  torch::Tensor fp32, narrow;
  if (fused) {
    const mpt::ops::NormOutput out = mpt::ops::layer_norm_and_narrow(input, *norm, torch::kBFloat16);
    fp32 = out.fp32, narrow = out.narrow;
  } else {
    fp32 = torch::layer_norm(input, {x.size(-1)}, norm->weight, norm->bias, 1e-12);
    narrow = fp32.to(torch::kBFloat16);
  }
  torch::manual_seed(31);
  torch::Tensor loss = torch::zeros({});
  if (through_fp32) loss = loss + (fp32 * torch::randn(x.sizes())).sum();
  if (through_narrow) loss = loss + (narrow.to(torch::kFloat) * torch::randn(x.sizes())).sum();
  loss.backward();
  return {input.grad(), norm->weight.grad().clone(), norm->bias.grad().clone()};
}

}  // namespace

TEST_CASE("layer_norm_and_narrow is layer_norm and a cast, with the gradients of both paths", "[fast][models]") {
  mpt::testing::with_threads(2, [] {  // each thread sums its rows' weight and bias gradients on its own
    torch::manual_seed(30);
    torch::nn::LayerNorm norm = trained_norm(64);
    const torch::Tensor x = 3 * torch::randn({4, 37, 64}) + 1;  // 148 rows: uneven shares

    const mpt::ops::NormOutput out = mpt::ops::layer_norm_and_narrow(x, *norm, torch::kBFloat16);
    const torch::Tensor reference = torch::layer_norm(x, {64}, norm->weight, norm->bias, 1e-12);
    REQUIRE(out.fp32.scalar_type() == torch::kFloat);
    REQUIRE(out.narrow.scalar_type() == torch::kBFloat16);
    CHECK(torch::allclose(out.fp32, reference, 1e-5, 1e-5));
    CHECK(torch::equal(out.narrow, out.fp32.to(torch::kBFloat16)));  // the FP32 output, rounded once

    for (const auto& [through_fp32, through_narrow] : {std::pair{true, true}, {true, false}, {false, true}}) {
      CAPTURE(through_fp32, through_narrow);
      const Gradients fused = gradients(norm, x, true, through_fp32, through_narrow);
      const Gradients unfused = gradients(norm, x, false, through_fp32, through_narrow);
      CHECK(torch::allclose(fused.x, unfused.x, 1e-4, 1e-5));
      CHECK(torch::allclose(fused.weight, unfused.weight, 1e-4, 1e-4));
      CHECK(torch::allclose(fused.bias, unfused.bias, 1e-4, 1e-4));
    }
  });
}

TEST_CASE("layer_norm_and_narrow takes layer_norm and a cast where it cannot fuse", "[fast][models]") {
  torch::manual_seed(32);
  // A hidden size that is not a whole number of vectors.
  torch::nn::LayerNorm odd = trained_norm(24);
  const torch::Tensor x = torch::randn({5, 24});
  const mpt::ops::NormOutput out = mpt::ops::layer_norm_and_narrow(x, *odd, torch::kBFloat16);
  const torch::Tensor reference = torch::layer_norm(x, {24}, odd->weight, odd->bias, 1e-12);
  CHECK(torch::equal(out.fp32, reference));
  CHECK(torch::equal(out.narrow, reference.to(torch::kBFloat16)));
  // An FP32 compute dtype: the narrow output is the FP32 output itself.
  torch::nn::LayerNorm norm = trained_norm(32);
  const mpt::ops::NormOutput same = mpt::ops::layer_norm_and_narrow(torch::randn({3, 32}), *norm, torch::kFloat);
  CHECK(same.narrow.is_same(same.fp32));
}
