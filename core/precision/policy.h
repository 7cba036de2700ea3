// The precision policy a run trains under: the compute dtype autocast uses, and which modules stay FP32.
// Models ask the policy by module name; they never pick dtypes themselves.
#pragma once

#include <torch/torch.h>

#include <string>
#include <vector>

#include "core/precision/loss_scaler.h"

namespace mpt::precision {

struct PrecisionConfig {
  std::string mode = "fp32";                      // resolved: fp32, mixed_bf16 or mixed_fp16
  std::vector<std::string> fp32_modules{"head"};  // glob patterns over module names
  LossScaleConfig loss_scale;
};

class Fp32Policy {
 public:
  explicit Fp32Policy(std::vector<std::string> patterns = {}) : patterns_(std::move(patterns)) {}
  bool keeps_fp32(const std::string& module_name) const;

 private:
  std::vector<std::string> patterns_;
};

// "mixed_bf16" -> kBFloat16, "mixed_fp16" -> kHalf, "fp32" -> kFloat.
torch::ScalarType compute_dtype(const std::string& resolved_mode);

// Glob match where '*' matches any run of characters (including dots): "layer*.bn*", "head".
bool glob_match(const std::string& pattern, const std::string& text);

}  // namespace mpt::precision
