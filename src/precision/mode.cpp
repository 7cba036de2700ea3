// Precision modes and strategies (see mode.h).
#include "precision/mode.h"

#include <array>
#include <utility>

#include "common/error.h"

namespace mpt::precision {
namespace {

constexpr std::array<std::pair<Mode, const char*>, 4> kModes = {
    {{Mode::kFp32, "fp32"}, {Mode::kMixedBf16, "mixed_bf16"}, {Mode::kMixedFp16, "mixed_fp16"}, {Mode::kFp8, "fp8"}}};
constexpr std::array<std::pair<Strategy, const char*>, 2> kStrategies = {
    {{Strategy::kAutocast, "autocast"}, {Strategy::kMasterWeights, "master_weights"}}};

template <typename T, size_t N>
T parse(const std::array<std::pair<T, const char*>, N>& table, const std::string& name, const char* what) {
  for (const auto& [value, text] : table)
    if (name == text) return value;
  MPT_CHECK(false, std::string(what) + " '" + name + "' was not resolved before use");
}

template <typename T, size_t N>
const char* name_of(const std::array<std::pair<T, const char*>, N>& table, T value) {
  for (const auto& [entry, text] : table)
    if (entry == value) return text;
  return "?";
}

}  // namespace

Mode parse_mode(const std::string& name) { return parse(kModes, name, "precision mode"); }
const char* mode_name(Mode mode) { return name_of(kModes, mode); }
Strategy parse_strategy(const std::string& name) { return parse(kStrategies, name, "precision strategy"); }
const char* strategy_name(Strategy strategy) { return name_of(kStrategies, strategy); }

torch::ScalarType compute_dtype(Mode mode) {
  switch (mode) {
    case Mode::kFp32: return torch::kFloat;
    case Mode::kMixedFp16: return torch::kHalf;
    case Mode::kMixedBf16:
    case Mode::kFp8: return torch::kBFloat16;
  }
  return torch::kFloat;
}

int operand_bytes(Mode mode) {
  return mode == Mode::kFp8 ? 1 : static_cast<int>(c10::elementSize(compute_dtype(mode)));
}

Choice<Mode> choose_mixed(bool cuda, const hardware::Facts& facts) {
  if (cuda) {
    const std::string capability =
        std::to_string(facts.cuda_capability / 10) + "." + std::to_string(facts.cuda_capability % 10);
    if (facts.cuda_capability >= 80) return {Mode::kMixedBf16, "CUDA compute capability " + capability + " has BF16"};
    return {Mode::kMixedFp16, "CUDA compute capability " + capability + " (< 8.0) has FP16 Tensor Cores only"};
  }
  if (facts.cpu_native_bf16) return {Mode::kMixedBf16, "this CPU has AVX512-BF16/AMX"};
  // FP16 needs CUDA; BF16 without native instructions still trains with BF16's numerics, only not faster.
  return {Mode::kMixedBf16,
          "this CPU has no native BF16 (AVX512-BF16/AMX): BF16 is emulated, with BF16's numerics but slower than "
          "fp32 here"};
}

Choice<Strategy> choose_strategy(Mode mode, bool cuda) {
  // On the CPU the fused optimizer reads the BF16 gradients and writes the BF16 weights as it steps the FP32
  // masters, which saves autocast's per-step weight casts (docs/findings.md); on a GPU the master copies would be
  // separate passes.
  if (mode == Mode::kFp32) return {Strategy::kAutocast, "auto: FP32 has no low-precision weights"};
  if (!cuda) return {Strategy::kMasterWeights, "auto: mixed precision on the CPU (one-pass master update)"};
  return {Strategy::kAutocast, "auto: on a GPU the master copies would be separate passes"};
}

Choice<LossScaleMode> choose_loss_scale(Mode mode) {
  switch (mode) {
    case Mode::kMixedFp16: return {LossScaleMode::kDynamic, "auto: fp16 needs loss scaling"};
    case Mode::kFp8:
      return {LossScaleMode::kNone,
              "auto: fp8 scales each FP8 tensor itself; the rest is BF16, with FP32's exponent range"};
    default: return {LossScaleMode::kNone, std::string("auto: ") + mode_name(mode) + " has FP32's exponent range"};
  }
}

std::string mode_problem(Mode mode, bool cuda) {
  if (mode == Mode::kMixedFp16 && !cuda)
    return "mixed_fp16 needs device.type cuda: LibTorch has no FP16 GEMM/conv on CPU; use mixed_bf16";
  return "";
}

std::string strategy_problem(Strategy strategy, Mode mode) {
  if (strategy == Strategy::kMasterWeights && mode == Mode::kFp32)
    return "master_weights keeps FP32 masters of low-precision weights; it needs a mixed precision.mode";
  return "";
}

}  // namespace mpt::precision
