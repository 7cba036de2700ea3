// What every mpt model is to the trainer: a torch Module mapping a batch of inputs to FP32-able logits.
#pragma once

#include <torch/torch.h>

namespace mpt::models {

class ModelImpl : public torch::nn::Module {
 public:
  virtual torch::Tensor forward(const torch::Tensor& inputs) = 0;  // (B, ...) -> logits (B, classes)
};

using Model = std::shared_ptr<ModelImpl>;

}  // namespace mpt::models
