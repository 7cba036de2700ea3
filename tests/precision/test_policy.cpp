// Precision policy: module patterns, and the FP32 island really computing in FP32 under BF16 autocast.
#include <catch2/catch.hpp>

#include "core/precision/autocast.h"
#include "core/precision/policy.h"
#include "models/mlp.h"

using namespace mpt::precision;

TEST_CASE("glob patterns match module names", "[fast][precision]") {
  CHECK(glob_match("head", "head"));
  CHECK_FALSE(glob_match("head", "header"));
  CHECK(glob_match("hidden.*", "hidden.0"));
  CHECK(glob_match("*norm*", "encoder.layer.3.attention.output.LayerNorm") == false);  // case matters
  CHECK(glob_match("*Norm*", "encoder.layer.3.attention.output.LayerNorm"));
  CHECK(Fp32Policy(std::vector<std::string>{"head", "hidden.1"}).keeps_fp32("hidden.1"));
  CHECK_FALSE(Fp32Policy(std::vector<std::string>{"head"}).keeps_fp32("hidden.0"));
}

TEST_CASE("under BF16 autocast the hidden layer is BF16 and the FP32 head's logits are FP32", "[fast][precision]") {
  mpt::models::MlpConfig config;
  config.in_features = 8;
  config.hidden_sizes = {16};
  config.num_classes = 3;
  auto input = torch::randn({4, 8});

  mpt::models::MlpImpl kept(config, Fp32Policy(std::vector<std::string>{"head"}));
  mpt::models::MlpImpl cast(config, Fp32Policy(std::vector<std::string>{}));
  torch::Tensor kept_logits, cast_logits, hidden;
  {
    AutocastScope autocast(torch::kCPU, torch::kBFloat16);
    hidden = torch::nn::Linear(8, 16)->forward(input);
    kept_logits = kept.forward(input);
    cast_logits = cast.forward(input);
  }
  CHECK(hidden.dtype() == torch::kBFloat16);
  CHECK(kept_logits.dtype() == torch::kFloat);
  CHECK(cast_logits.dtype() == torch::kBFloat16);
  // The scope restores the previous state: no autocast outside it.
  CHECK(torch::nn::Linear(8, 16)->forward(input).dtype() == torch::kFloat);
}

TEST_CASE("fp32 mode does not autocast", "[fast][precision]") {
  AutocastScope off(torch::kCPU, compute_dtype("fp32"));
  CHECK(torch::nn::Linear(4, 4)->forward(torch::randn({2, 4})).dtype() == torch::kFloat);
  CHECK(compute_dtype("mixed_bf16") == torch::kBFloat16);
  CHECK(compute_dtype("mixed_fp16") == torch::kHalf);
}
