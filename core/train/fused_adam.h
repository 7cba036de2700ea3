// Adam and AdamW with a one-pass CPU update. LibTorch's C++ Adam runs five tensor ops per parameter (two for
// each moment, one for the denominator, one for the update), reading and writing the 4-byte weights and moments
// about twice as often as needed; Adam is memory-bound, so a BERT-base step spent 150-175 ms in it. These
// subclasses keep LibTorch's state (AdamParamState: step, exp_avg, exp_avg_sq), options and serialisation, so
// checkpoints are unchanged, and update FP32 CPU parameters in one fused loop on all threads; anything else
// (CUDA, other dtypes, amsgrad) takes the base class's step.
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

}  // namespace mpt::train
