// The master_weights strategy (Apex O2, the seed's "weights stored in FP16, the optimizer keeps an FP32 master
// copy"): parameters outside the FP32 islands live in BF16/FP16 in the model; the optimizer updates FP32 masters,
// which are copied back after every step and are what checkpoints hold.
#pragma once

#include <torch/torch.h>

#include <string>
#include <vector>

#include "core/precision/policy.h"

namespace mpt::precision {

using NamedTensors = torch::OrderedDict<std::string, torch::Tensor>;

class MasterWeights {
 public:
  // Casts every parameter of `model` outside the policy's FP32 islands and its norm layers to `dtype` in place,
  // keeping an FP32 master copy of each; FP32 parameters are their own masters.
  MasterWeights(torch::nn::Module& model, const ModulePolicy& policy, torch::ScalarType dtype);

  const NamedTensors& masters() const { return masters_; }  // FP32, named like the model's parameters

  void grads_to_masters();  // after backward: FP32 copies of the model's low-precision gradients
  void masters_to_model();  // after an optimizer step or a checkpoint load

 private:
  struct Pair {
    torch::Tensor model_param;
    torch::Tensor master;
    bool shared;  // an FP32 island parameter: the same tensor
  };
  std::vector<Pair> pairs_;
  NamedTensors masters_;
};

}  // namespace mpt::precision
