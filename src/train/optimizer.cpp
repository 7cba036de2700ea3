// Optimizer construction from its config section.
#include "train/optimizer.h"

#include "common/error.h"
#include "ops/fused_optimizers.h"

namespace mpt::train {

std::unique_ptr<torch::optim::Optimizer> build_optimizer(const OptimizerConfig& config,
                                                         const std::vector<torch::Tensor>& parameters) {
  if (config.name == "sgd") {
    auto options = torch::optim::SGDOptions(config.lr)
                       .momentum(config.momentum)
                       .nesterov(config.nesterov)
                       .weight_decay(config.weight_decay);
    if (config.nesterov && config.momentum <= 0)
      throw UsageError("optimizer.nesterov = true needs optimizer.momentum > 0");
    return std::make_unique<ops::FusedSgd>(parameters, options);
  }
  if (config.name == "adam") {
    auto options = torch::optim::AdamOptions(config.lr)
                       .betas({config.beta1, config.beta2})
                       .eps(config.eps)
                       .weight_decay(config.weight_decay);
    return std::make_unique<ops::FusedAdam>(parameters, options);
  }
  if (config.name == "adamw") {
    auto options = torch::optim::AdamWOptions(config.lr)
                       .betas({config.beta1, config.beta2})
                       .eps(config.eps)
                       .weight_decay(config.weight_decay);
    return std::make_unique<ops::FusedAdamW>(parameters, options);
  }
  throw UsageError("optimizer.name: unknown optimizer '" + config.name + "'; expected sgd, adam or adamw");
}

void set_learning_rate(torch::optim::Optimizer& optimizer, double lr) {
  for (auto& group : optimizer.param_groups()) group.options().set_lr(lr);
}

}  // namespace mpt::train
