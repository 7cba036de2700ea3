// The GEMM formats precision.mode fp8 can take, each a descriptor: the precision.fp8.recipe values it answers to
// (the key's choices are assembled from them), what logs and mpt inspect call it, its layers' verdicts and its
// factory. A new format is its own file and one line in gemm_formats.cpp.
#pragma once

#include <torch/torch.h>

#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "precision/fp8_config.h"
#include "precision/gemm_format.h"
#include "precision/policy.h"

namespace mpt::precision {

struct GemmFormatKind {
  std::string title;                 // "FP8", "MXFP8"
  std::vector<std::string> recipes;  // the precision.fp8.recipe values that pick it
  std::function<std::vector<GemmEligibility>(torch::nn::Module&, const ModulePolicy&)> eligibility;
  std::function<std::unique_ptr<LowPrecisionGemms>(const Fp8Config&, torch::nn::Module&, const ModulePolicy&,
                                                   torch::Device)>
      make;
};

const std::vector<GemmFormatKind>& gemm_formats();

// The format `recipe` picks; throws UsageError naming precision.fp8.recipe for an unknown one.
const GemmFormatKind& gemm_format(const std::string& recipe);

}  // namespace mpt::precision
