// ops::gelu: the exact (erf) GELU, values and gradient against torch::gelu.
#include <catch2/catch.hpp>
#include <cmath>
#include <limits>

#include "ops/dispatch.h"
#include "ops/gelu.h"
#include "tests/support/helpers.h"

TEST_CASE("gelu matches the exact GELU in value and gradient, tails and odd lengths included", "[fast][models]") {
  // Elsewhere gelu is torch::gelu itself (the next test), whose FP32 tail cancels to 0 below x = -5.5.
  if (!mpt::ops::avx512_bf16_kernels()) MPT_SKIP("no AVX512-BF16 on this CPU: gelu takes torch::gelu");
  torch::manual_seed(40);
  // 1,000 elements (not a whole number of vectors), the tails included.
  const torch::Tensor base = torch::cat(
      {4 * torch::randn({990}), torch::tensor({-12.0f, -8.0f, -5.5f, -3.0f, -1e-4f, 0.0f, 1e-4f, 3.0f, 8.0f, 30.0f})});
  const torch::Tensor upstream = torch::randn({1000});
  for (const auto dtype : {torch::kFloat, torch::kBFloat16}) {
    CAPTURE(dtype);
    const torch::Tensor x = base.to(dtype).detach().clone().requires_grad_();
    const torch::Tensor fused = mpt::ops::gelu(x);
    REQUIRE(fused.scalar_type() == dtype);
    fused.backward(upstream.to(dtype));
    const torch::Tensor fused_grad = x.grad().clone();

    // The reference in double, from the same (rounded) inputs, with Phi through erfc (torch::gelu's
    // 1 + erf(x / sqrt 2) cancels to 0 below x = -8 even in double).
    const torch::Tensor xd = x.detach().to(torch::kDouble);
    const torch::Tensor cdf = 0.5 * torch::erfc(-xd / std::sqrt(2.0));
    const torch::Tensor exact = xd * cdf;
    const torch::Tensor exact_grad =
        upstream.to(dtype).to(torch::kDouble) * (cdf + xd * torch::exp(-0.5 * xd * xd) / std::sqrt(2.0 * M_PI));
    // FP32: relative 1e-4 and absolute 1e-7 (Phi's approximation is good to 1.5e-7 absolute, which the lower tail
    // of x Phi(x) turns into a relative error growing to 0.5% at x = -5.5, where ATen's FP32 1 + erf(x / sqrt 2)
    // already cancels to 0); BF16: the output's rounding.
    const double rtol = dtype == torch::kFloat ? 1e-4 : 8e-3;
    CHECK(torch::allclose(fused.to(torch::kDouble), exact, rtol, 1e-7));
    CHECK(torch::allclose(fused_grad.to(torch::kDouble), exact_grad, rtol, 1e-7));
  }
  // NaN stays NaN; the far tails are 0 and x.
  const torch::Tensor special =
      mpt::ops::gelu(torch::tensor({std::numeric_limits<float>::quiet_NaN(), -200.0f, 200.0f}));
  CHECK(std::isnan(special[0].item<float>()));
  CHECK(special[1].item<float>() == 0.0f);
  CHECK(special[2].item<float>() == 200.0f);
}

TEST_CASE("gelu takes torch::gelu for layouts it does not fuse", "[fast][models]") {
  const torch::Tensor x = torch::randn({8, 6}).t();  // not contiguous
  CHECK(torch::equal(mpt::ops::gelu(x), torch::gelu(x)));
  const torch::Tensor d = torch::randn({10}, torch::kDouble);
  CHECK(torch::equal(mpt::ops::gelu(d), torch::gelu(d)));
}
