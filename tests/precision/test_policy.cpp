// Precision policy: module patterns, and the FP32 island really computing in FP32 under BF16 autocast.
#include <catch2/catch.hpp>

#include "models/mlp.h"
#include "precision/autocast.h"
#include "precision/policy.h"

using namespace mpt::precision;

TEST_CASE("glob patterns match module names", "[fast][precision]") {
  CHECK(glob_match("head", "head"));
  CHECK_FALSE(glob_match("head", "header"));
  CHECK(glob_match("hidden.*", "hidden.0"));
  CHECK(glob_match("*norm*", "encoder.layer.3.attention.output.LayerNorm") == false);  // case matters
  CHECK(glob_match("*Norm*", "encoder.layer.3.attention.output.LayerNorm"));
  CHECK(ModulePolicy(std::vector<std::string>{"head", "hidden.1"}).keeps_fp32("hidden.1"));
  CHECK_FALSE(ModulePolicy(std::vector<std::string>{"head"}).keeps_fp32("hidden.0"));
}

TEST_CASE("under BF16 autocast the hidden layer is BF16 and the FP32 head's logits are FP32", "[fast][precision]") {
  mpt::models::MlpConfig config;
  config.in_features = 8;
  config.hidden_sizes = {16};
  config.num_classes = 3;
  auto input = torch::randn({4, 8});

  mpt::models::MlpImpl kept(config, ModulePolicy(std::vector<std::string>{"head"}));
  mpt::models::MlpImpl cast(config, ModulePolicy(std::vector<std::string>{}));
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
  AutocastScope off(torch::kCPU, compute_dtype(Mode::kFp32));
  CHECK(torch::nn::Linear(4, 4)->forward(torch::randn({2, 4})).dtype() == torch::kFloat);
  CHECK(compute_dtype(Mode::kMixedBf16) == torch::kBFloat16);
  CHECK(compute_dtype(Mode::kMixedFp16) == torch::kHalf);
}

TEST_CASE("check_numerics names the first module whose output overflowed, with dtype and input range",
          "[fast][precision]") {
  mpt::models::MlpConfig config;
  config.in_features = 4;
  config.hidden_sizes = {8, 8};
  config.num_classes = 2;
  NumericsMonitor monitor;
  mpt::models::MlpImpl model(config, ModulePolicy(std::vector<std::string>{"head"}, &monitor));
  model.forward(torch::ones({2, 4}));
  CHECK_FALSE(monitor.take());
  {
    torch::NoGradGuard no_grad;
    model.named_parameters()["hidden.0.weight"].fill_(0.1f);  // positive activations into hidden.1
    model.named_parameters()["hidden.0.bias"].fill_(1.0f);
    model.named_parameters()["hidden.1.weight"].fill_(3e38f);  // finite weights, overflowing products
  }
  AutocastScope autocast(torch::kCPU, torch::kBFloat16);
  model.forward(torch::ones({2, 4}));
  auto found = monitor.take();
  REQUIRE(found);
  CHECK(found->module == "hidden.1");
  CHECK(found->dtype == "BFloat16");
  CHECK(found->input_min >= 0.0);  // after ReLU
  CHECK_THAT(describe(*found), Catch::Contains("hidden.1 produced Inf/NaN in BFloat16"));
  CHECK_FALSE(monitor.take());  // taken once
}
