// Dynamic masked-LM masking (BERT; RoBERTa's per-batch variant): every time a sequence is batched, each
// non-special token is chosen with probability p; a chosen token becomes [MASK] (80%), a random token (10%) or
// stays (10%), and only chosen positions carry a target. Deterministic in the seed, so a resumed run and the
// evaluation set see the same masks.
#pragma once

#include <torch/torch.h>

#include <cstdint>

#include "data/dataset.h"

namespace mpt::data {

inline constexpr int64_t kIgnoredTarget = -100;  // targets the loss skips

struct MaskedTokens {
  torch::Tensor inputs;   // int64 (B, S): the tokens with the chosen ones replaced
  torch::Tensor targets;  // int64 (B, S): the original token where chosen, kIgnoredTarget elsewhere
};

// At least one position is chosen when any is eligible, so a batch always has a loss.
MaskedTokens mask_tokens(const torch::Tensor& tokens, const MaskedLmConfig& config, uint64_t seed);

// int64 (M): the flat indices of the targets that are not kIgnoredTarget, in row-major order.
torch::Tensor target_positions(const torch::Tensor& targets);

}  // namespace mpt::data
