// FP8 Linear layers: delayed scaling traced against a reference of the rule, which layers go FP8 and why the
// others do not, and an FP8 layer's forward and backward against FP32 within the formats' error.
#include <catch2/catch.hpp>

#include <algorithm>
#include <cmath>
#include <deque>
#include <limits>

#include "config/schema.h"
#include "precision/fp8.h"
#include "precision/gemm_formats.h"

using namespace mpt::precision;

namespace {

// The delayed-scaling rule written out on plain numbers: the history holds the last N steps' amaxes (a
// non-finite one as 0); after each step the scale becomes max / max(history) / 2^margin, unless the history
// is all zeros.
struct ReferenceDelayedScale {
  size_t length;
  double format_max;
  int margin;
  std::deque<float> history;
  float scale = 1.0f;

  void step(float amax) {
    history.push_front(std::isfinite(amax) ? amax : 0.0f);
    if (history.size() > length) history.pop_back();
    const float window = *std::max_element(history.begin(), history.end());
    if (window > 0) scale = static_cast<float>(format_max / std::ldexp(1.0, margin)) / window;
  }
};

struct OneLinear : torch::nn::Module {
  OneLinear(int64_t in, int64_t out, const std::string& name) {
    layer = register_module(name, torch::nn::Linear(in, out));
  }
  torch::nn::Linear layer{nullptr};
};

}  // namespace

TEST_CASE("delayed scaling follows the rule step by step: history window, margin, overflow steps ignored",
          "[fast][precision][fp8]") {
  Fp8Config config;
  config.amax_history = 4;
  config.margin = 1;
  Fp8Scale scale(mpt::ops::Float8::kE4M3, config, torch::kCPU);
  ReferenceDelayedScale reference{4, 448.0, 1};
  const float amaxes[] = {2.0f, 8.0f, 1.0f, 0.5f, 0.25f, std::numeric_limits<float>::infinity(), 0.125f, 3.0f,
                          0.0f, 0.0f, 0.0f, 0.0f, 0.0f};
  for (float amax : amaxes) {
    const torch::Tensor x = torch::tensor({amax, -amax / 2});
    const torch::Tensor used = scale.scale_for(x, /*record=*/true);
    CHECK(used.item<float>() == reference.scale);  // the step casts with the scale known before it
    scale.update();
    reference.step(amax);
    INFO("amax " << amax);
    CHECK(scale.scale.item<float>() == reference.scale);
  }
  // 8 left the window four steps after it came; the all-zero tail kept the last scale.
  CHECK(reference.scale == Approx(448.0 / 2 / 3.0));
}

TEST_CASE("current scaling maps this tensor's amax to the format's max", "[fast][precision][fp8]") {
  Fp8Config config;
  config.recipe = "current";
  Fp8Scale scale(mpt::ops::Float8::kE5M2, config, torch::kCPU);
  CHECK(scale.scale_for(torch::tensor({-7.0f, 2.0f}), true).item<float>() == 57344.0f / 7.0f);
  CHECK(scale.scale_for(torch::tensor({0.5f}), true).item<float>() == 57344.0f / 0.5f);
  CHECK(scale.saturated.item<int64_t>() == 0);  // current scaling never saturates
}

TEST_CASE("a layer runs in FP8 unless it is an FP32 island or a dimension is not a multiple of 16",
          "[fast][precision][fp8]") {
  torch::nn::Module model;
  model.register_module("hidden", torch::nn::Linear(784, 512));
  model.register_module("odd", torch::nn::Linear(512, 30));
  model.register_module("head", torch::nn::Linear(512, 10));
  const auto verdicts = fp8_eligibility(model, ModulePolicy({"head"}));
  REQUIRE(verdicts.size() == 3);
  CHECK(verdicts[0].low_precision);
  CHECK_FALSE(verdicts[1].low_precision);
  CHECK(verdicts[1].why_not == "BF16: out_features 30 not a multiple of 16");
  CHECK_FALSE(verdicts[2].low_precision);
  CHECK(verdicts[2].why_not == "FP32: an FP32 island (precision.fp32_modules)");
}

TEST_CASE("the GEMM formats are picked by their recipes, which are precision.fp8.recipe's choices",
          "[fast][precision][fp8]") {
  CHECK(gemm_format("delayed").title == "FP8");
  CHECK(gemm_format("current").title == "FP8");
  CHECK(gemm_format("mxfp8").title == "MXFP8");
  CHECK_THROWS_WITH(gemm_format("nvfp4"), Catch::Contains("precision.fp8.recipe"));
  std::vector<std::string> recipes;
  for (const auto& format : gemm_formats()) recipes.insert(recipes.end(), format.recipes.begin(), format.recipes.end());
  CHECK(mpt::config::find_key("precision.fp8.recipe")->choices == recipes);
  // Every format walks the same layers; only its shape rule differs (MXFP8 pads a partial block).
  torch::nn::Module model;
  model.register_module("odd", torch::nn::Linear(512, 30));
  CHECK_FALSE(gemm_format("delayed").eligibility(model, ModulePolicy(std::vector<std::string>{}))[0].low_precision);
  CHECK(gemm_format("mxfp8").eligibility(model, ModulePolicy(std::vector<std::string>{}))[0].low_precision);
}

TEST_CASE(
    "an FP8 layer's output and gradients match FP32 within E4M3's and E5M2's rounding, and its scales "
    "are checkpointable state",
    "[fast][precision][fp8]") {
  torch::manual_seed(11);
  OneLinear model(64, 32, "proj");
  Fp8Config config;
  config.recipe = "current";
  const torch::Tensor x = torch::randn({16, 64}, torch::requires_grad());
  const torch::Tensor g = torch::randn({16, 32});
  // FP32 reference.
  const torch::Tensor y_ref = torch::linear(x, model.layer->weight, model.layer->bias);
  const auto grads_ref = torch::autograd::grad({y_ref}, {x, model.layer->weight, model.layer->bias}, {g});

  torch::Tensor y;
  torch::autograd::variable_list grads;
  const ModulePolicy policy;  // its router: what a model's projections call
  {
    Fp8Gemms fp8(config, model, policy, torch::kCPU);
    policy.router().attach(&fp8);
    REQUIRE(fp8.layer_for(model.layer->weight) != nullptr);
    y = policy.linear(x, model.layer->weight, model.layer->bias);
    grads = torch::autograd::grad({y}, {x, model.layer->weight, model.layer->bias}, {g});
    CHECK(fp8.state().size() == 6);  // input, weight, grad_output: history and scale each
    CHECK(fp8.state()[0].first == "fp8.proj.input.history");
    policy.router().attach(nullptr);
  }
  CHECK(y.scalar_type() == torch::kBFloat16);      // FP8 GEMMs output BF16
  CHECK(grads[1].scalar_type() == torch::kFloat);  // the FP32 weight's gradient stays FP32
  const double e4m3 = 1.0 / 16, e5m2 = 1.0 / 8, bf16 = 1.0 / 256;
  auto within = [](const torch::Tensor& got, const torch::Tensor& want, const torch::Tensor& scale, double u) {
    const torch::Tensor error = (got.to(torch::kDouble) - want.to(torch::kDouble)).abs();
    return (error <= u * scale.to(torch::kDouble) + 1e-3).all().item<bool>();
  };
  const torch::Tensor w = model.layer->weight.detach();
  CHECK(within(y, y_ref, torch::mm(x.detach().abs(), w.abs().t()) + model.layer->bias.detach().abs(),
               2 * e4m3 + e4m3 * e4m3 + bf16));
  CHECK(within(grads[0], grads_ref[0], torch::mm(g.abs(), w.abs()), e4m3 + e5m2 + e4m3 * e5m2));
  CHECK(within(grads[1], grads_ref[1], torch::mm(g.abs().t(), x.detach().abs()), e4m3 + e5m2 + e4m3 * e5m2));
  // The bias gradient is the BF16 output's gradient (autograd rounds it to the output's dtype) summed in FP32.
  CHECK(torch::allclose(grads[2], g.to(torch::kBFloat16).to(torch::kFloat).sum(0), 1e-5, 1e-5));
  CHECK_FALSE(torch::allclose(y.to(torch::kFloat), y_ref, 1e-3, 1e-3));  // it did run in FP8

  // With no format attached, the route is the plain linear.
  CHECK(torch::allclose(policy.linear(x, model.layer->weight, model.layer->bias), y_ref));
}

TEST_CASE("a tiny amax gives FP32's largest scale, as Transformer Engine clamps it, and a zero casts to zero",
          "[fast][precision][fp8]") {
  const float largest = std::numeric_limits<float>::max();
  Fp8Config delayed;
  Fp8Scale scale(mpt::ops::Float8::kE4M3, delayed, torch::kCPU);
  scale.scale_for(torch::tensor({1e-36f, 0.0f}), /*record=*/true);  // 448 / 1e-36 is past FP32's range
  scale.update();
  CHECK(scale.scale.item<float>() == largest);
  const torch::Tensor x = torch::tensor({0.0f, -0.0f, 1e-36f, -1e-36f});
  const torch::Tensor cast = mpt::ops::to_float8(x, scale.scale, mpt::ops::Float8::kE4M3).to(torch::kFloat);
  CHECK_FALSE(torch::isnan(cast).any().item<bool>());
  CHECK(cast[0].item<float>() == 0.0f);
  CHECK(cast[2].item<float>() > 0.0f);  // 1e-36 maps near the format's top instead of vanishing

  Fp8Config current;
  current.recipe = "current";
  Fp8Scale now(mpt::ops::Float8::kE5M2, current, torch::kCPU);
  CHECK(now.scale_for(torch::tensor({1e-38f}), true).item<float>() == largest);
}

TEST_CASE(
    "saved FP8 state is checked before a resume: non-finite, zero, denormal or huge scales, bad amaxes, "
    "and a delayed scale its history does not give",
    "[fast][precision][fp8]") {
  OneLinear model(32, 16, "proj");
  Fp8Config config;
  Fp8Gemms fp8(config, model, ModulePolicy(), torch::kCPU);
  torch::OrderedDict<std::string, torch::Tensor> saved;
  for (const auto& [name, tensor] : fp8.state()) saved.insert(name, tensor.clone());
  CHECK(fp8.check_state(saved) == "");  // a fresh state: zero histories, scales of 1

  auto with = [&](const std::string& name, const torch::Tensor& value) {
    torch::OrderedDict<std::string, torch::Tensor> changed = saved;
    changed[name] = value;
    return fp8.check_state(changed);
  };
  const float nan = std::numeric_limits<float>::quiet_NaN(), inf = std::numeric_limits<float>::infinity();
  for (float bad : {nan, 0.0f, 1e-40f, inf, -2.0f}) {
    INFO(bad);
    CHECK_THAT(with("fp8.proj.weight.scale", torch::tensor(bad)),
               Catch::Contains("tensor 'fp8.proj.weight.scale'") && Catch::Contains("FP32's normal positive range"));
  }
  torch::Tensor history = torch::zeros({config.amax_history});
  history[3] = nan;
  CHECK_THAT(with("fp8.proj.input.history", history), Catch::Contains("'fp8.proj.input.history' [3] = nan"));
  history[3] = -1.0f;
  CHECK_THAT(with("fp8.proj.input.history", history), Catch::Contains("an amax >= 0 and finite"));
  // 3e38 is a finite scale, but this history (amax 2) gives 448 / 2 = 224.
  history[3] = 2.0f;
  torch::OrderedDict<std::string, torch::Tensor> tampered = saved;
  tampered["fp8.proj.input.history"] = history;
  tampered["fp8.proj.input.scale"] = torch::tensor(3e38f);
  CHECK_THAT(fp8.check_state(tampered), Catch::Contains("but its amax history gives 224"));
  tampered["fp8.proj.input.scale"] = torch::tensor(224.0f);
  CHECK(fp8.check_state(tampered) == "");
}
