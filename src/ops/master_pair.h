// What a fused optimizer step updates: an FP32 weight the optimizer owns and the model parameter whose gradient
// it reads and whose value it writes back (precision/master_weights.h makes them).
#pragma once

#include <torch/torch.h>

namespace mpt::ops {

// The model's parameter (BF16/FP16 under master_weights, holding the gradient after backward) and its FP32
// master (the optimizer's); an FP32 parameter (an island's; every one under autocast) is its own master.
struct MasterPair {
  torch::Tensor model_param;
  torch::Tensor master;
  bool shared;  // an FP32 parameter: the same tensor
};

}  // namespace mpt::ops
