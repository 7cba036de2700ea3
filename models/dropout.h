// Dropout whose CPU mask is counter-based: one 64-bit seed drawn from torch's default generator per call, then
// an independent hash of (seed, element index) per element, filled on all threads. LibTorch's CPU dropout draws
// every element from one mt19937 in sequence (without MKL, as in Debian's build), which cost bert-base 260 ms of
// a 1.6 s BF16 step here. Reproducible under torch::manual_seed and across a checkpoint resume (the generator's
// state is checkpointed); CUDA keeps LibTorch's own parallel Philox dropout.
#pragma once

#include <torch/torch.h>

namespace mpt::models {

// Zeroes each element with probability p and scales the rest by 1 / (1 - p) when training; x itself otherwise.
torch::Tensor dropout(const torch::Tensor& x, double p, bool training);

}  // namespace mpt::models
