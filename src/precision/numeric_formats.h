// The number formats `mpt numerics` measures a layer in, each cast as the recipe that trains in it casts: BF16 and
// FP16 as autocast rounds, FP8 with a per-tensor scale from the tensor's amax (E4M3 forward, E5M2 gradients), MXFP8
// with a scale per block of 32. And what a tensor loses to each: values that flush to zero, become subnormal or
// saturate.
#pragma once

#include <torch/torch.h>

#include <optional>
#include <string>
#include <vector>

#include "precision/mode.h"

namespace mpt::precision {

enum class NumericFormat { kBf16, kFp16, kFp8, kMxfp8 };

const char* format_name(NumericFormat format);  // "bf16", "fp16", "fp8", "mxfp8"
// "bf16,fp8" -> the formats; a UsageError naming `what` and the choices for anything else.
std::vector<NumericFormat> parse_formats(const std::string& list, const std::string& what);
// The format a run's GEMMs train in (fp8 recipe mxfp8 -> MXFP8), or none under FP32.
std::optional<NumericFormat> training_format(Mode mode, const std::string& fp8_recipe);

enum class TensorRole { kInput, kWeight, kGradOutput };

// What casting a tensor to a format does to its values, summed over the tensors seen.
struct RangeStats {
  double amax = 0.0;
  double min_nonzero = 0.0;                                       // the smallest nonzero magnitude (0: none seen)
  int64_t values = 0, flushed = 0, subnormal = 0, saturated = 0;  // saturated: rounds past the largest value
  double scale = 1.0;  // what the tensor was multiplied by before the cast (FP8's scale; FP16 gradients' loss scale)

  void merge(const RangeStats& other);
  double share(int64_t count) const { return values ? static_cast<double>(count) / static_cast<double>(values) : 0.0; }
};

// `x` (FP32) cast as `format` casts a tensor of `role`: FP8 scaled by max / amax / 2^fp8_margin, FP16 gradients
// multiplied by `loss_scale` first, MXFP8 blocked along the last dimension.
RangeStats range_stats(const torch::Tensor& x, NumericFormat format, TensorRole role, int64_t fp8_margin,
                       double loss_scale);

// The loss scales a format's gradients could take: the largest power of two that overflows no gradient seen and
// the smallest that flushes none (the two cross when no scale does both).
struct LossScaleWindow {
  double without_overflow = 0.0, without_flush = 0.0;
};
LossScaleWindow fp16_loss_scale_window(const RangeStats& grad_output);

}  // namespace mpt::precision
