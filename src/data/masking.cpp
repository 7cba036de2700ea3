// Masked-LM masking with its own generator per batch.
#include "data/masking.h"

namespace mpt::data {

MaskedTokens mask_tokens(const torch::Tensor& tokens, const MaskedLmConfig& config, uint64_t seed) {
  torch::Generator generator = at::detail::createCPUGenerator(seed);
  torch::Tensor eligible = torch::ones_like(tokens, torch::kBool);
  for (int64_t special : config.special_ids) eligible &= tokens.ne(special);

  torch::Tensor chosen = torch::rand(tokens.sizes(), generator).lt(config.probability) & eligible;
  if (!chosen.any().item<bool>()) {  // tiny batches: predict the first eligible token rather than nothing
    const torch::Tensor first = eligible.reshape({-1}).nonzero();
    if (first.size(0) > 0) chosen.view({-1})[first[0][0]] = true;
  }
  const torch::Tensor action = torch::rand(tokens.sizes(), generator);  // < 0.8 mask, < 0.9 random, else keep
  const torch::Tensor random_tokens = torch::randint(config.vocab_size, tokens.sizes(), generator, torch::kLong);

  MaskedTokens out;
  out.inputs = tokens.masked_fill(chosen & action.lt(0.8), config.mask_id);
  out.inputs = torch::where(chosen & action.ge(0.8) & action.lt(0.9), random_tokens, out.inputs);
  out.targets = tokens.masked_fill(chosen.logical_not(), kIgnoredTarget);
  return out;
}

torch::Tensor target_positions(const torch::Tensor& targets) {
  return targets.reshape({-1}).ne(kIgnoredTarget).nonzero().squeeze(1);
}

}  // namespace mpt::data
