// precision.mode and precision.strategy as types, and the choices "mixed" and "auto" stand for on a machine. The
// spec carries them as text up to resolution; from the resolved spec on, code asks these enums (or the Recipe that
// holds them), never the names.
#pragma once

#include <torch/torch.h>

#include <string>

#include "hardware/hardware.h"
#include "precision/loss_scaler.h"

namespace mpt::precision {

enum class Mode { kFp32, kMixedBf16, kMixedFp16, kFp8 };
enum class Strategy { kAutocast, kMasterWeights };

// Resolved names: "fp32", "mixed_bf16", "mixed_fp16", "fp8"; "autocast", "master_weights". Anything else is a
// broken invariant (resolution and the key table admit nothing else).
Mode parse_mode(const std::string& name);
const char* mode_name(Mode mode);
Strategy parse_strategy(const std::string& name);
const char* strategy_name(Strategy strategy);

// The dtype autocast computes in: BF16 for mixed_bf16 and fp8 (BF16 outside the FP8 GEMMs), FP16, or FP32.
torch::ScalarType compute_dtype(Mode mode);
// Bytes of a GEMM operand element: 4, 2, or 1 for FP8.
int operand_bytes(Mode mode);

// What "mixed" (and "auto" for the strategy and the loss scale) become, each with its reason for config.yaml.
template <typename T>
struct Choice {
  T value;
  std::string reason;
};
Choice<Mode> choose_mixed(bool cuda, const hardware::Facts& facts);
Choice<Strategy> choose_strategy(Mode mode, bool cuda);
Choice<LossScaleMode> choose_loss_scale(Mode mode);

// Why `mode` cannot run on this device, or "".
std::string mode_problem(Mode mode, bool cuda);
// Why `strategy` does not fit `mode`, or "".
std::string strategy_problem(Strategy strategy, Mode mode);

}  // namespace mpt::precision
