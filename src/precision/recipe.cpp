// The precision recipe (see recipe.h): the one place that turns the precision section into objects.
#include "precision/recipe.h"

#include <fmt/format.h>

#include "precision/gemm_formats.h"

namespace mpt::precision {
namespace {

// The GEMM format precision.fp8.recipe names, when the mode is fp8.
std::unique_ptr<LowPrecisionGemms> make_gemms(const PrecisionConfig& config, torch::nn::Module& model,
                                              const ModulePolicy& policy, torch::Device device) {
  if (config.mode != Mode::kFp8) return nullptr;
  return gemm_format(config.fp8.recipe).make(config.fp8, model, policy, device);
}

}  // namespace

Recipe::Recipe(const PrecisionConfig& config, torch::nn::Module& model, const ModulePolicy& policy,
               const std::set<std::string>& keep_fp32, torch::Device device)
    : mode_(config.mode),
      strategy_(config.strategy),
      policy_(policy),
      scaler_(config.loss_scale),
      masters_(config.strategy == Strategy::kMasterWeights
                   ? std::make_unique<MasterWeights>(model, policy, precision::compute_dtype(config.mode), keep_fp32)
                   : nullptr),
      gemms_(make_gemms(config, model, policy, device)),
      weights_(masters_ ? masters_->masters() : model.named_parameters()) {
  if (masters_) {
    pairs_ = masters_->pairs();
  } else {
    for (const auto& item : weights_) pairs_.push_back({item.value(), item.value(), /*shared=*/true});
  }
  policy_.router().attach(gemms_.get());
}

std::string Recipe::describe() const { return fmt::format("{} ({})", mode_name(mode_), strategy_name(strategy_)); }

void Recipe::grads_to_masters() {
  if (masters_) masters_->grads_to_masters();
}

void Recipe::masters_to_model() {
  if (masters_) masters_->masters_to_model();
}

std::vector<std::pair<std::string, torch::Tensor>> Recipe::state() const {
  return gemms_ ? gemms_->state() : std::vector<std::pair<std::string, torch::Tensor>>{};
}

std::string Recipe::check_state(const NamedTensors& saved) const { return gemms_ ? gemms_->check_state(saved) : ""; }

void Recipe::after_step(const AgreeMax& agree_max) {
  if (gemms_) gemms_->after_step(agree_max);
}

bool Recipe::computes_in_fp32(const std::string& parameter) const {
  const size_t dot = parameter.rfind('.');
  return mode_ == Mode::kFp32 || policy_.runs_in_fp32(dot == std::string::npos ? parameter : parameter.substr(0, dot));
}

GemmPlan gemm_plan(const PrecisionConfig& config, torch::nn::Module& model, const ModulePolicy& policy) {
  if (config.mode != Mode::kFp8) return {};
  const GemmFormatKind& format = gemm_format(config.fp8.recipe);
  return {format.title, format.eligibility(model, policy)};
}

}  // namespace mpt::precision
