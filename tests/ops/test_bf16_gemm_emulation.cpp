// BF16 autocast emulated through FP32 products (CPUs without a fast BF16 GEMM): the same numerics as a BF16 GEMM
// with FP32 accumulation — BF16-rounded inputs, the output rounded to BF16 — and gradients that flow.
#include <catch2/catch.hpp>

#include "ops/bf16_gemm_emulation.h"
#include "precision/autocast.h"
#include "tests/support/helpers.h"

using namespace mpt::precision;
using namespace mpt::ops;

namespace {

torch::Tensor rounded(const torch::Tensor& t) { return t.to(torch::kBFloat16).to(torch::kFloat); }

}  // namespace

TEST_CASE("emulated BF16 linear, conv2d and bmm equal FP32 products of BF16-rounded inputs", "[fast][precision]") {
  if (!enable_cpu_bf16_emulation()) MPT_SKIP("this CPU multiplies BF16 natively: autocast is not emulated here");
  torch::manual_seed(3);
  const torch::Tensor x = torch::randn({8, 32}, torch::requires_grad());
  const torch::Tensor w = torch::randn({16, 32}, torch::requires_grad());
  const torch::Tensor image = torch::randn({2, 3, 10, 10});
  const torch::Tensor kernel = torch::randn({4, 3, 3, 3});
  const torch::Tensor a = torch::randn({3, 5, 7}), b = torch::randn({3, 7, 6});
  torch::Tensor linear, conv, bmm;
  {
    AutocastScope autocast(torch::kCPU, torch::kBFloat16);
    linear = torch::nn::functional::linear(x, w);
    conv = torch::conv2d(image, kernel, {}, /*stride=*/1, /*padding=*/1);
    bmm = torch::bmm(a, b);
  }
  CHECK(linear.scalar_type() == torch::kBFloat16);  // what autocast promises downstream ops
  CHECK(torch::equal(linear, torch::mm(rounded(x), rounded(w).t()).to(torch::kBFloat16)));
  CHECK(torch::equal(conv, torch::conv2d(rounded(image), rounded(kernel), {}, 1, 1).to(torch::kBFloat16)));
  CHECK(torch::equal(bmm, torch::bmm(rounded(a), rounded(b)).to(torch::kBFloat16)));
  // Against ATen's own (slow) BF16 product: the same up to the accumulation order, within one BF16 rounding.
  const torch::Tensor native = torch::mm(x.detach().to(torch::kBFloat16), w.detach().to(torch::kBFloat16).t());
  CHECK(torch::allclose(linear.to(torch::kFloat), native.to(torch::kFloat), 1e-2, 1e-2));

  linear.to(torch::kFloat).sum().backward();
  REQUIRE(x.grad().defined());
  CHECK(x.grad().scalar_type() == torch::kFloat);
  CHECK(torch::allclose(x.grad(), rounded(torch::ones({8, 16}).mm(rounded(w))), 1e-2, 1e-2));
}

TEST_CASE("ops outside the emulated set keep autocast's own behaviour", "[fast][precision]") {
  if (!enable_cpu_bf16_emulation()) MPT_SKIP("this CPU multiplies BF16 natively: autocast is not emulated here");
  const torch::Tensor x = torch::randn({4, 10});
  AutocastScope autocast(torch::kCPU, torch::kBFloat16);
  CHECK(torch::softmax(x, 1).scalar_type() == torch::kFloat);  // autocast's FP32 list
  CHECK(torch::relu(x).scalar_type() == torch::kFloat);        // not an autocast op: input's dtype
}

TEST_CASE("FP16 autocast is not emulated: its GEMMs and convolutions stay autocast's FP16 ones", "[fast][precision]") {
  if (!enable_cpu_bf16_emulation()) MPT_SKIP("this CPU multiplies BF16 natively: autocast is not emulated here");
  torch::manual_seed(4);
  const torch::Tensor image = torch::randn({2, 3, 8, 8}), kernel = torch::randn({4, 3, 3, 3});
  const torch::Tensor x = torch::randn({5, 16}), w = torch::randn({8, 16});
  torch::Tensor conv, linear;
  {
    AutocastScope autocast(torch::kCPU, torch::kHalf);  // mpt numerics measures FP16 this way on the CPU
    conv = torch::conv2d(image, kernel, {}, /*stride=*/1, /*padding=*/1);
    linear = torch::nn::functional::linear(x, w);
  }
  CHECK(conv.scalar_type() == torch::kHalf);
  CHECK(torch::equal(conv, torch::conv2d(image.to(torch::kHalf), kernel.to(torch::kHalf), {}, 1, 1)));
  CHECK(torch::equal(linear, torch::nn::functional::linear(x.to(torch::kHalf), w.to(torch::kHalf))));
}
