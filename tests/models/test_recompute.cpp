// Activation checkpointing: with memory.activation_checkpointing full (ResNet blocks, BERT layers) or selective
// (BERT's attention core), every gradient, every buffer and the FP8 scaling state after a step are bit for bit those
// of the run that keeps every activation, under each precision recipe.
#include <catch2/catch.hpp>

#include "hardware/cpu_tensor_memory.h"
#include "models/resnet.h"
#include "models/registry.h"
#include "ops/bf16_gemm_emulation.h"
#include "precision/autocast.h"
#include "precision/recipe.h"
#include "tests/support/helpers.h"

using namespace mpt;
using models::Recompute;

namespace {

struct Outcome {
  std::vector<std::pair<std::string, torch::Tensor>> grads, buffers, fp8_state;
};

precision::PrecisionConfig recipe_config(precision::Mode mode, precision::Strategy strategy,
                                         const std::string& fp8_recipe = "current") {
  precision::PrecisionConfig config;
  config.mode = mode;
  config.strategy = strategy;
  config.fp32_modules = {"fc", "*LayerNorm", "classifier", "*layernorm", "model.norm", "lm_head"};
  config.fp8.recipe = fp8_recipe;
  return config;
}

// One training step of `name` from the same seeds, with `recompute`, under `config`; `kept_bytes`, when given, gets
// the CPU tensor bytes that the forward's graph holds for backward (those after the loss, less those before).
Outcome one_step(const std::string& name, Recompute recompute, const precision::PrecisionConfig& config,
                 int64_t* kept_bytes = nullptr) {
  models::ModelConfig model_config;
  model_config.name = name;
  model_config.dropout = 0.1;
  model_config.options.set("model.head", std::string("classification"));
  model_config.options.set("model.small_input", true);
  model_config.options.set("model.patch_size", int64_t{4});
  const bool causal = name.rfind("llama", 0) == 0, text = causal || name.rfind("bert", 0) == 0;
  data::SampleShape sample = text ? data::SampleShape{} : testing::image_sample(3, 16, 10);
  if (text) sample.seq_len = 32, sample.vocab_size = 200, sample.num_classes = causal ? 0 : 3;
  sample.causal = causal;
  torch::manual_seed(3);
  const precision::ModulePolicy policy(config.fp32_modules);
  models::Model model = models::build_model(model_config, sample, policy, models::MemoryConfig{recompute});
  precision::Recipe recipe(config, *model, policy, model->tied_to_fp32_islands(), torch::kCPU);
  model->train();
  torch::manual_seed(4);  // the batch and the dropout masks
  const torch::Tensor inputs = text ? torch::randint(5, 200, {4, 32}) : torch::randn({4, 3, 16, 16});
  const torch::Tensor targets =
      causal ? inputs.roll(-1, 1) : torch::randint(0, text ? 3 : 10, {4});  // next tokens (the last wraps around)
  torch::Tensor loss;
  const int64_t bytes_before = hardware::cpu_tensor_bytes();
  {
    precision::AutocastScope autocast(torch::kCPU, recipe.compute_dtype());
    const models::Prediction prediction = model->predict(inputs, targets);
    loss = torch::nn::functional::cross_entropy(prediction.logits.to(torch::kFloat), prediction.targets);
  }
  if (kept_bytes) *kept_bytes = hardware::cpu_tensor_bytes() - bytes_before;
  loss.backward();
  recipe.after_step(nullptr);
  Outcome outcome;
  for (const auto& item : model->named_parameters()) outcome.grads.emplace_back(item.key(), item.value().grad());
  for (const auto& item : model->named_buffers()) outcome.buffers.emplace_back(item.key(), item.value().clone());
  for (const auto& [key, tensor] : recipe.state()) outcome.fp8_state.emplace_back(key, tensor.clone());
  return outcome;
}

void check_equal(const std::vector<std::pair<std::string, torch::Tensor>>& expected,
                 const std::vector<std::pair<std::string, torch::Tensor>>& actual) {
  REQUIRE(expected.size() == actual.size());
  for (size_t i = 0; i < expected.size(); ++i) {
    INFO(expected[i].first);
    REQUIRE(expected[i].second.defined() == actual[i].second.defined());
    if (expected[i].second.defined()) CHECK(torch::equal(expected[i].second, actual[i].second));
  }
}

void check_recompute(const std::string& name, Recompute recompute, precision::Mode mode, precision::Strategy strategy,
                     const std::string& fp8_recipe = "current") {
  INFO(precision::mode_name(mode) << " " << precision::strategy_name(strategy) << " " << fp8_recipe);
  const precision::PrecisionConfig config = recipe_config(mode, strategy, fp8_recipe);
  const Outcome kept = one_step(name, Recompute::kNone, config), recomputed = one_step(name, recompute, config);
  check_equal(kept.grads, recomputed.grads);
  check_equal(kept.buffers, recomputed.buffers);      // batch norm's running statistics updated once
  check_equal(kept.fp8_state, recomputed.fp8_state);  // the amaxes recorded once
}

}  // namespace

TEST_CASE(
    "full checkpointing of ResNet blocks gives bit-identical gradients and running statistics, in FP32 and "
    "BF16 with and without master weights",
    "[slow][models][memory]") {
  using precision::Mode, precision::Strategy;
  check_recompute("resnet18", Recompute::kFull, Mode::kFp32, Strategy::kAutocast);
  check_recompute("resnet18", Recompute::kFull, Mode::kMixedBf16, Strategy::kAutocast);
  check_recompute("resnet18", Recompute::kFull, Mode::kMixedBf16, Strategy::kMasterWeights);
}

TEST_CASE(
    "full and selective checkpointing of BERT layers give bit-identical gradients under every recipe, FP8's "
    "amaxes recorded once",
    "[fast][models][memory]") {
  using precision::Mode, precision::Strategy;
  for (Recompute recompute : {Recompute::kFull, Recompute::kSelective}) {
    INFO(models::recompute_name(recompute));
    check_recompute("bert-tiny", recompute, Mode::kFp32, Strategy::kAutocast);
    check_recompute("bert-tiny", recompute, Mode::kMixedBf16, Strategy::kAutocast);
    check_recompute("bert-tiny", recompute, Mode::kMixedBf16, Strategy::kMasterWeights);
    check_recompute("bert-tiny", recompute, Mode::kFp8, Strategy::kMasterWeights);
    check_recompute("bert-tiny", recompute, Mode::kFp8, Strategy::kMasterWeights, "mxfp8");
  }
}

TEST_CASE("full checkpointing of ViT blocks gives bit-identical gradients under every recipe",
          "[fast][models][memory]") {
  using precision::Mode, precision::Strategy;
  check_recompute("vit-tiny", Recompute::kFull, Mode::kFp32, Strategy::kAutocast);
  check_recompute("vit-tiny", Recompute::kFull, Mode::kMixedBf16, Strategy::kAutocast);
  check_recompute("vit-tiny", Recompute::kFull, Mode::kMixedBf16, Strategy::kMasterWeights);
  check_recompute("vit-tiny", Recompute::kFull, Mode::kFp8, Strategy::kMasterWeights, "delayed");
  check_recompute("vit-tiny", Recompute::kFull, Mode::kFp8, Strategy::kMasterWeights, "mxfp8");
}

TEST_CASE(
    "full and selective checkpointing of Llama layers give bit-identical gradients under every recipe, FP8's "
    "amaxes recorded once",
    "[fast][models][memory]") {
  using precision::Mode, precision::Strategy;
  for (Recompute recompute : {Recompute::kFull, Recompute::kSelective}) {
    INFO(models::recompute_name(recompute));
    check_recompute("llama-tiny", recompute, Mode::kFp32, Strategy::kAutocast);
    check_recompute("llama-tiny", recompute, Mode::kMixedBf16, Strategy::kAutocast);
    check_recompute("llama-tiny", recompute, Mode::kMixedBf16, Strategy::kMasterWeights);
    check_recompute("llama-tiny", recompute, Mode::kFp8, Strategy::kMasterWeights, "delayed");
    check_recompute("llama-tiny", recompute, Mode::kFp8, Strategy::kMasterWeights, "mxfp8");
  }
}

TEST_CASE("checkpointing changes nothing in evaluation, and a model family says which modes it has blocks for",
          "[fast][models][memory]") {
  CHECK((models::model_family("mlp").recomputes == std::vector<Recompute>{Recompute::kNone}));
  CHECK(models::model_family("resnet50").recomputes.size() == 2);
  CHECK(models::model_family("bert-base").recomputes.size() == 3);
  CHECK(models::model_family("vit-b16").recomputes.size() == 2);
  CHECK(models::parse_recompute("selective") == Recompute::kSelective);
  CHECK_THROWS_AS(models::parse_recompute("some"), UsageError);
}

// What selective checkpointing lets go of, in bert-tiny (2 layers; batch 4, sequence 32, hidden 128, FFN 512) beside
// the attention core: each layer's GELU output and the attention output's input, which the next projections save,
// and under BF16 the norms' narrow copies the projections read (all but the first layer's, a cast of the
// embeddings). Kept, it held at least these bytes more; the gradients stay bit for bit those of none.
int64_t selective_saving(precision::Mode mode, precision::Strategy strategy) {
  hardware::count_cpu_tensor_memory();
  const precision::PrecisionConfig config = recipe_config(mode, strategy);
  int64_t kept_all = 0, kept_selective = 0;
  const Outcome kept = one_step("bert-tiny", Recompute::kNone, config, &kept_all);
  const Outcome recomputed = one_step("bert-tiny", Recompute::kSelective, config, &kept_selective);
  check_equal(kept.grads, recomputed.grads);
  return kept_all - kept_selective;
}

constexpr int64_t kTokens = 4 * 32, kHidden = 128, kFeedForward = 512, kLayers = 2;

TEST_CASE("selective checkpointing lets go of BERT's GELU outputs and attention-output inputs in FP32",
          "[fast][models][memory]") {
  const int64_t bytes = 4 * kTokens * kLayers * (kFeedForward + kHidden);
  CHECK(selective_saving(precision::Mode::kFp32, precision::Strategy::kAutocast) >= bytes);
}

TEST_CASE("selective checkpointing also lets go of the norms' BF16 copies where BF16 is multiplied natively",
          "[fast][models][memory]") {
  if (ops::enable_cpu_bf16_emulation())
    MPT_SKIP("autocast is emulated on this CPU: its GEMMs save FP32 copies of their inputs, not the tensors let go");
  const int64_t bytes = 2 * kTokens * (kLayers * (kFeedForward + 2 * kHidden) + (kLayers - 1) * kHidden);
  CHECK(selective_saving(precision::Mode::kMixedBf16, precision::Strategy::kMasterWeights) >= bytes);
}
