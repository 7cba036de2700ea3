// Loss scaler: the update rule on host doubles (no device round trip for the scale itself), and unscaling
// through the fused CUDA kernel where it exists or a portable per-tensor path on CPU.
#include "precision/loss_scaler.h"

#include <cmath>

#include "common/error.h"

namespace mpt::precision {

LossScaler::LossScaler(LossScaleConfig config) : config_(config) {
  state_.scale = config_.mode == LossScaleMode::kNone ? 1.0 : config_.init;
  state_.lowest_scale = state_.scale;
  state_.hysteresis_left = config_.hysteresis;
}

torch::Tensor LossScaler::scale_loss(const torch::Tensor& loss) const {
  return state_.scale == 1.0 ? loss : loss * state_.scale;
}

bool LossScaler::unscale_and_check(const std::vector<torch::Tensor>& grads) const {
  if (grads.empty()) return false;
  return unscale_and_flag(grads).item<float>() != 0.0f;
}

torch::Tensor LossScaler::unscale_and_flag(const std::vector<torch::Tensor>& grads) const {
  if (grads.empty()) return torch::zeros({1});
  const double inverse = 1.0 / state_.scale;
  const auto device = grads.front().device();
  // The fused kernel on CUDA; on the CPU the portable path below (one host read, the same decision).
  if (device.is_cuda()) {
    auto found = torch::zeros({1}, torch::TensorOptions().dtype(torch::kFloat).device(device));
    auto inv = torch::full({1}, inverse, torch::TensorOptions().dtype(torch::kFloat).device(device));
    at::_amp_foreach_non_finite_check_and_unscale_(grads, found, inv);
    return found;
  }
  // Portable path: scale in place, then one sum per tensor, joined before the single host read. A sum is non-finite
  // exactly when an element is Inf or NaN (NaN and Inf propagate; +Inf with -Inf gives NaN), unless finite unscaled
  // gradients add up past FP32's 3.4e38, which real gradients do not. It reads each gradient once, where
  // isfinite().all() also wrote and re-read a bool copy of it, which made the scaler phase several times longer
  // (docs/findings.md).
  std::vector<torch::Tensor> sums;
  sums.reserve(grads.size());
  for (const auto& grad : grads) {
    if (inverse != 1.0) grad.mul_(inverse);
    sums.push_back(grad.sum().to(torch::kFloat));
  }
  return torch::logical_not(torch::isfinite(torch::stack(sums)).all()).to(torch::kFloat).reshape({1});
}

namespace {

// GradScaler keeps its scale in an FP32 tensor: each product is rounded to FP32, which matters for factors that
// are not powers of two.
double as_fp32(double scale) { return static_cast<double>(static_cast<float>(scale)); }

}  // namespace

ScaleUpdate LossScaler::update(bool found_nonfinite) {
  ScaleUpdate result{ScaleChange::kNone, state_.scale, state_.scale};
  if (config_.mode != LossScaleMode::kDynamic) return result;
  if (found_nonfinite) {
    state_.growth_tracker = 0;
    state_.overflows_at_min = state_.scale <= config_.min_scale ? state_.overflows_at_min + 1 : 0;
    if (state_.hysteresis_left > 1) {
      --state_.hysteresis_left;  // DeepSpeed: absorbed, but the step is still skipped
    } else {                     // and, as there, hysteresis is re-armed only by the next growth
      const double lowered = std::max(as_fp32(state_.scale * config_.backoff_factor), config_.min_scale);
      if (lowered < state_.scale) {
        state_.scale = lowered;
        ++state_.backoffs;
        result.change = ScaleChange::kBackoff;
      }
    }
  } else {
    state_.overflows_at_min = 0;
    if (++state_.growth_tracker == config_.growth_interval) {
      state_.growth_tracker = 0;
      state_.hysteresis_left = config_.hysteresis;
      const double grown = std::min(as_fp32(state_.scale * config_.growth_factor), config_.max_scale);
      if (std::isfinite(grown) && grown > state_.scale) {  // PyTorch's rule: never grow into Inf
        state_.scale = grown;
        ++state_.growths;
        result.change = ScaleChange::kGrowth;
      }
    }
  }
  state_.lowest_scale = std::min(state_.lowest_scale, state_.scale);
  result.new_scale = state_.scale;
  return result;
}

bool LossScaler::collapsed() const {
  return config_.mode == LossScaleMode::kDynamic && state_.overflows_at_min >= config_.max_overflows_at_min;
}

LossScaleMode parse_loss_scale_mode(const std::string& name) {
  if (name == "dynamic") return LossScaleMode::kDynamic;
  if (name == "static") return LossScaleMode::kStatic;
  if (name == "none") return LossScaleMode::kNone;
  throw UsageError("precision.loss_scale.mode: expected dynamic, static or none, got '" + name + "'");
}

const char* loss_scale_mode_name(LossScaleMode mode) {
  switch (mode) {
    case LossScaleMode::kDynamic: return "dynamic";
    case LossScaleMode::kStatic: return "static";
    case LossScaleMode::kNone: return "none";
  }
  return "?";
}

}  // namespace mpt::precision
