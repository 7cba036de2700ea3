// Dynamic loss scaling, PyTorch's GradScaler rule with the seed's defaults: start at 2^15, x0.5 and skip the
// step on a non-finite gradient, x2 after growth_interval clean steps. LibTorch has no GradScaler (pytorch#44710).
// Options from DeepSpeed: hysteresis (back off only after N overflows), a floor and a ceiling, and collapse
// detection (N consecutive overflows at the floor means training cannot recover).
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
  int64_t hysteresis = 1;             // overflows tolerated before a backoff (1 = PyTorch, 2 = DeepSpeed)
  double min_scale = 1.0;             // floor; 0 = none (PyTorch)
  double max_scale = 16777216.0;      // ceiling (2^24, Apex); inf = none (PyTorch)
  int64_t max_overflows_at_min = 10;  // consecutive overflows at the floor before the scale has collapsed
};

// Everything a checkpoint needs to continue scaling exactly where it stopped.
struct LossScaleState {
  double scale = 1.0;
  int64_t growth_tracker = 0;  // clean steps since the last growth or backoff
  int64_t backoffs = 0;
  int64_t growths = 0;
  double lowest_scale = 1.0;     // the smallest scale so far (summary.json loss_scale.min)
  int64_t hysteresis_left = 1;   // overflows still tolerated before the next backoff
  int64_t overflows_at_min = 0;  // consecutive overflows while at the floor
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
  // The same without the host read: a 1-element FP32 tensor on the gradients' device, non-zero when any
  // element is Inf/NaN (data parallelism all-reduces it so that every rank skips the same steps).
  torch::Tensor unscale_and_flag(const std::vector<torch::Tensor>& grads) const;

  // The scale rule; call once per optimizer step with that step's overflow flag.
  ScaleUpdate update(bool found_nonfinite);

  // True once max_overflows_at_min consecutive steps overflowed at the floor: lowering the scale cannot help.
  bool collapsed() const;

 private:
  LossScaleConfig config_;
  LossScaleState state_;
};

LossScaleMode parse_loss_scale_mode(const std::string& name);
const char* loss_scale_mode_name(LossScaleMode mode);

}  // namespace mpt::precision
