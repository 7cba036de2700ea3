// Dynamic loss scaling, PyTorch's GradScaler rule with the seed's defaults: start at 2^15, x0.5 and skip the
// step on a non-finite gradient, x2 after growth_interval clean steps. LibTorch has no GradScaler (pytorch#44710).
#pragma once

#include <torch/torch.h>

#include <string>
#include <vector>

namespace mpt::precision {

enum class LossScaleMode { kDynamic, kStatic, kNone };

struct LossScaleConfig {
  LossScaleMode mode = LossScaleMode::kDynamic;
  double init = 32768.0;
  double growth_factor = 2.0;
  double backoff_factor = 0.5;
  int64_t growth_interval = 2000;
};

// Everything a checkpoint needs to continue scaling exactly where it stopped.
struct LossScaleState {
  double scale = 1.0;
  int64_t growth_tracker = 0;  // clean steps since the last growth or backoff
  int64_t backoffs = 0;
  int64_t growths = 0;
  double min_scale = 1.0;
};

enum class ScaleChange { kNone, kGrowth, kBackoff };

struct ScaleUpdate {
  ScaleChange change = ScaleChange::kNone;
  double old_scale = 1.0;
  double new_scale = 1.0;
};

class LossScaler {
 public:
  explicit LossScaler(LossScaleConfig config);

  double scale() const { return state_.scale; }
  const LossScaleState& state() const { return state_; }
  void load_state(const LossScaleState& state) { state_ = state; }

  torch::Tensor scale_loss(const torch::Tensor& loss) const;

  // Divides every gradient by the scale and reports whether any element is Inf/NaN.
  // Call once per optimizer step (after all micro-batches); costs one host sync.
  bool unscale_and_check(const std::vector<torch::Tensor>& grads) const;

  // The scale rule; call once per optimizer step with that step's overflow flag.
  ScaleUpdate update(bool found_nonfinite);

 private:
  LossScaleConfig config_;
  LossScaleState state_;
};

LossScaleMode parse_loss_scale_mode(const std::string& name);
const char* loss_scale_mode_name(LossScaleMode mode);

}  // namespace mpt::precision
