// MXFP8 Linear layers: each of the three GEMMs takes both operands blocked along its own reduction dimension (checked
// against the casts and GEMM of ops/mxfp8.h applied by hand), sizes that are not whole blocks end in a zero-padded
// partial block, and the result stays within E4M3's rounding of FP32.
#include <catch2/catch.hpp>

#include "ops/mxfp8.h"
#include "precision/mxfp8.h"

using namespace mpt::precision;
using mpt::ops::from_mxfp8;
using mpt::ops::to_mxfp8;

namespace {

struct OneLinear : torch::nn::Module {
  OneLinear(int64_t in, int64_t out) { layer = register_module("proj", torch::nn::Linear(in, out)); }
  torch::nn::Linear layer{nullptr};
};

// What MXFP8 makes of `x` blocked along its last dimension, back in FP32.
torch::Tensor mx(const torch::Tensor& x) { return from_mxfp8(to_mxfp8(x)); }

}  // namespace

TEST_CASE("an MXFP8 layer's forward, input gradient and weight gradient block each GEMM along its reduction",
          "[fast][precision][mxfp8]") {
  torch::manual_seed(5);
  OneLinear model(64, 96);
  const ModulePolicy policy;
  Mxfp8Gemms gemms(model, policy);
  policy.router().attach(&gemms);
  REQUIRE(gemms.eligibility().size() == 1);
  CHECK(gemms.eligibility()[0].low_precision);
  const torch::Tensor x = torch::randn({32, 64}, torch::requires_grad()), g = torch::randn({32, 96});
  const torch::Tensor w = model.layer->weight.detach(), b = model.layer->bias.detach();
  const torch::Tensor y = policy.linear(x, model.layer->weight, model.layer->bias);
  const auto grads = torch::autograd::grad({y}, {x, model.layer->weight, model.layer->bias}, {g});
  // forward: x and W along K; dX = dY W: dY and W^T along N; dW = dY^T X: dY^T and X^T along M. The output is
  // BF16, so autograd hands the backward dY rounded to BF16.
  const torch::Tensor dy = g.to(torch::kBFloat16).to(torch::kFloat);
  CHECK(torch::equal(y, (torch::mm(mx(x.detach()), mx(w).t()).to(torch::kBFloat16) + b.to(torch::kBFloat16))));
  CHECK(torch::equal(grads[0], torch::mm(mx(dy), mx(w.t().contiguous()).t())));
  CHECK(torch::equal(grads[1], torch::mm(mx(dy.t().contiguous()), mx(x.detach().t().contiguous()).t())));
  CHECK(torch::allclose(grads[2], dy.sum(0)));
  // E4M3 keeps 3 mantissa bits: each product within about 2^-3 of its magnitude.
  const torch::Tensor reference = torch::linear(x.detach(), w, b);
  const torch::Tensor bound = torch::mm(x.detach().abs(), w.abs().t()) * (2.0 / 16 + 1.0 / 256) + 1e-3;
  CHECK(((y.to(torch::kFloat) - reference).abs() <= bound).all().item<bool>());
  CHECK_FALSE(torch::allclose(y.to(torch::kFloat), reference, 1e-3, 1e-3));  // it did run in MXFP8
  policy.router().attach(nullptr);
}

TEST_CASE("an MXFP8 layer of sizes that are not whole blocks pads each reduction with zeros",
          "[fast][precision][mxfp8]") {
  torch::manual_seed(6);
  OneLinear model(40, 24);  // K = 40, N = 24, and M = 10 rows: no dimension is a whole block
  const ModulePolicy policy;
  Mxfp8Gemms gemms(model, policy);
  policy.router().attach(&gemms);
  const torch::Tensor x = torch::randn({10, 40}, torch::requires_grad()), g = torch::randn({10, 24});
  const torch::Tensor w = model.layer->weight.detach();
  const torch::Tensor y = policy.linear(x, model.layer->weight, {});
  const auto grads = torch::autograd::grad({y}, {x, model.layer->weight}, {g});
  auto padded = [](const torch::Tensor& t) { return torch::constant_pad_nd(t, {0, (32 - t.size(1) % 32) % 32}); };
  const torch::Tensor dy = g.to(torch::kBFloat16).to(torch::kFloat);
  CHECK(torch::equal(y, torch::mm(mx(padded(x.detach())), mx(padded(w)).t()).to(torch::kBFloat16)));
  CHECK(
      torch::equal(grads[1], torch::mm(mx(padded(dy.t().contiguous())), mx(padded(x.detach().t().contiguous())).t())));
  CHECK(grads[0].sizes() == x.sizes());
  policy.router().attach(nullptr);
}

TEST_CASE("MXFP8 takes every Linear layer but the FP32 islands, and keeps no scale state", "[fast][precision][mxfp8]") {
  torch::nn::Module model;
  model.register_module("hidden", torch::nn::Linear(784, 512));
  model.register_module("head", torch::nn::Linear(512, 10));
  Mxfp8Gemms gemms(model, ModulePolicy({"head"}));
  REQUIRE(gemms.eligibility().size() == 2);
  CHECK(gemms.eligibility()[0].low_precision);
  CHECK(gemms.eligibility()[1].why_not == "FP32: an FP32 island (precision.fp32_modules)");
  CHECK(gemms.state().empty());
  CHECK(std::string(gemms.name()) == "MXFP8");
}
