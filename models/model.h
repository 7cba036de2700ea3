// What every mpt model is to the trainer: a torch Module mapping a batch of inputs to FP32-able logits.
#pragma once

#include <torch/torch.h>

namespace mpt::models {

class ModelImpl : public torch::nn::Module {
 public:
  virtual torch::Tensor forward(const torch::Tensor& inputs) = 0;  // (B, ...) -> logits (B, classes)

  // Multiply-accumulates of one forward pass for one sample of shape (C, H, W); training costs about
  // 3 x 2 x this many FLOPs (forward, and backward for inputs and weights).
  virtual int64_t forward_macs(int64_t channels, int64_t height, int64_t width) const = 0;
};

using Model = std::shared_ptr<ModelImpl>;

}  // namespace mpt::models
