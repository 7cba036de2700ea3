// Adam, AdamW and SGD with a one-pass CPU update. LibTorch's C++ Adam runs five tensor ops per parameter (two for
// each moment, one for the denominator, one for the update), SGD with momentum and weight decay four, reading and
// writing the 4-byte weights and state several times more than needed; the update is memory-bound, so a
// BERT-base step spent 150-175 ms in Adam. These subclasses keep LibTorch's state (AdamParamState: step, exp_avg,
// exp_avg_sq; SGDParamState: momentum_buffer), options and serialisation, so checkpoints are unchanged, and update
// FP32 CPU parameters in one fused loop on all threads; anything else (CUDA, other dtypes, amsgrad) takes the base
// class's step.
#pragma once

#include <torch/torch.h>

namespace mpt::train {

class FusedAdam : public torch::optim::Adam {
 public:
  using torch::optim::Adam::Adam;
  torch::Tensor step(LossClosure closure = nullptr) override;
};

class FusedAdamW : public torch::optim::AdamW {
 public:
  using torch::optim::AdamW::AdamW;
  torch::Tensor step(LossClosure closure = nullptr) override;
};

class FusedSgd : public torch::optim::SGD {
 public:
  using torch::optim::SGD::SGD;
  torch::Tensor step(LossClosure closure = nullptr) override;
};

}  // namespace mpt::train
