// Optimizers over the model's FP32 parameters (the master weights under autocast).
#pragma once

#include <torch/torch.h>

#include <memory>
#include <string>

namespace mpt::train {

struct OptimizerConfig {
  std::string name = "adam";  // sgd | adam | adamw
  double lr = 1e-3;
  double momentum = 0.9;
  bool nesterov = false;
  double weight_decay = 0.0;
  double beta1 = 0.9;
  double beta2 = 0.999;
  double eps = 1e-8;
};

std::unique_ptr<torch::optim::Optimizer> build_optimizer(const OptimizerConfig& config,
                                                         const std::vector<torch::Tensor>& parameters);

void set_learning_rate(torch::optim::Optimizer& optimizer, double lr);

}  // namespace mpt::train
