// MLP forward. B = batch, D = input features, H = hidden width, K = classes.
#include "models/mlp.h"

#include "ops/dropout.h"

namespace mpt::models {

MlpImpl::MlpImpl(const MlpConfig& config, const precision::ModulePolicy& policy) : config_(config) {
  hidden_ = register_module("hidden", torch::nn::ModuleList());
  int64_t width = config_.in_features;
  for (size_t i = 0; i < config_.hidden_sizes.size(); ++i) {
    hidden_->push_back(torch::nn::Linear(width, config_.hidden_sizes[i]));
    hidden_runners_.push_back(policy.runner("hidden." + std::to_string(i)));
    width = config_.hidden_sizes[i];
  }
  head_ = register_module("head", torch::nn::Linear(width, config_.num_classes));
  head_runner_ = policy.runner("head");
}

torch::Tensor MlpImpl::activate(const torch::Tensor& x) const {
  if (config_.activation == "gelu") return torch::gelu(x);
  if (config_.activation == "tanh") return torch::tanh(x);
  return torch::relu(x);
}

torch::Tensor MlpImpl::forward(const torch::Tensor& inputs) {
  torch::Tensor x = inputs.flatten(1);  // (B, D)
  for (size_t i = 0; i < hidden_->size(); ++i) {
    auto layer = hidden_->ptr<torch::nn::LinearImpl>(i);
    const precision::ModuleRunner& runner = hidden_runners_[i];
    x = runner(x, [&](const torch::Tensor& h) { return runner.linear(h, layer->weight, layer->bias); });
    x = activate(x);  // (B, H)
    if (config_.dropout > 0) x = ops::dropout(x, config_.dropout, is_training());
  }
  return head_runner_(
      x, [&](const torch::Tensor& h) { return head_runner_.linear(h, head_->weight, head_->bias); });  // (B, K)
}

int64_t MlpImpl::forward_macs(const data::SampleShape& sample) const {
  int64_t macs = 0, width_in = sample.features();
  for (int64_t width_out : config_.hidden_sizes) macs += width_in * width_out, width_in = width_out;
  return macs + width_in * config_.num_classes;
}

namespace {

const keys::OptionTable<MlpConfig>& mlp_options() {
  static const keys::OptionTable<MlpConfig> table = [] {
    keys::OptionTable<MlpConfig> options;
    options.add("model.hidden_sizes", &MlpConfig::hidden_sizes, "MLP hidden layer widths, input to output.").min = 1;
    options.add("model.activation", &MlpConfig::activation, "MLP hidden activation.").one_of({"relu", "gelu", "tanh"});
    return options;
  }();
  return table;
}

Model build_mlp(const ModelConfig& model, const MemoryConfig&, const data::SampleShape& sample,
                const precision::ModulePolicy& policy) {
  MlpConfig config = mlp_options().read(model.options);
  config.dropout = model.dropout;
  config.in_features = sample.features();
  config.num_classes = sample.num_classes;
  return std::make_shared<MlpImpl>(config, policy);
}

}  // namespace

const ModelFamily& mlp_family() {
  static const ModelFamily family{"mlp",
                                  "MLP",
                                  data::Modality::kImages,
                                  {"mlp"},
                                  mlp_options().keys(),
                                  /*takes_dropout=*/true,
                                  /*fp32_modules=*/{"head"},
                                  {Recompute::kNone},
                                  build_mlp,
                                  nullptr,
                                  /*hf_base_prefix=*/"",
                                  /*hf_config=*/nullptr};
  return family;
}

}  // namespace mpt::models
