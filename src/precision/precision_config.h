// The spec's precision section (resolved: "mixed" and "auto" are decided by then, precision/mode.h).
#pragma once

#include <string>
#include <vector>

#include "precision/fp8_config.h"
#include "precision/loss_scaler.h"
#include "precision/mode.h"

namespace mpt::precision {

struct PrecisionConfig {
  Mode mode = Mode::kFp32;
  Strategy strategy = Strategy::kAutocast;
  // Glob patterns over module names: the output layers and the norms of every model family.
  std::vector<std::string> fp32_modules{"head", "fc", "*LayerNorm", "cls.predictions", "classifier"};
  bool tf32 = false;  // CUDA only
  LossScaleConfig loss_scale;
  Fp8Config fp8;  // mode fp8
};

}  // namespace mpt::precision
