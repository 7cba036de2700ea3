// Number formats and their range statistics (see numeric_formats.h).
#include "precision/numeric_formats.h"

#include <algorithm>
#include <array>
#include <cmath>
#include <sstream>
#include <utility>

#include "common/error.h"
#include "ops/float8.h"
#include "ops/mxfp8.h"
#include "precision/fp8.h"

namespace mpt::precision {
namespace {

constexpr std::array<std::pair<NumericFormat, const char*>, 4> kFormats = {{{NumericFormat::kBf16, "bf16"},
                                                                            {NumericFormat::kFp16, "fp16"},
                                                                            {NumericFormat::kFp8, "fp8"},
                                                                            {NumericFormat::kMxfp8, "mxfp8"}}};

// An element format's range: the largest finite value, the smallest normal and the smallest subnormal, and where
// rounding to nearest stops landing on the largest value (half a step past it): beyond, a value saturates or
// overflows.
struct ElementRange {
  double max, min_normal, min_subnormal, overflow;
};
constexpr ElementRange kBf16Range{0x1.fep127, 0x1p-126, 0x1p-133, 0x1.ffp127};
constexpr ElementRange kFp16Range{65504.0, 0x1p-14, 0x1p-24, 65520.0};
constexpr ElementRange kE4m3Range{448.0, 0x1p-6, 0x1p-9, 480.0};
constexpr ElementRange kE5m2Range{57344.0, 0x1p-14, 0x1p-16, 61440.0};

// A tensor in its element format's units: before the cast (scaled) and after it (rounded), both FP32.
struct Cast {
  torch::Tensor scaled, rounded;
  double scale = 1.0;
  ElementRange range;
};

Cast cast_float8(const torch::Tensor& x, ops::Float8 format, int64_t margin) {
  const torch::Tensor scale = scale_from_amax(x.abs().max(), torch::ones({}, x.options()), format, margin);
  return {x * scale, ops::to_float8(x, scale, format).to(torch::kFloat), scale.item<double>(),
          format == ops::Float8::kE4M3 ? kE4m3Range : kE5m2Range};
}

Cast cast_mxfp8(const torch::Tensor& x) {
  torch::Tensor rows = x.reshape({-1, x.size(-1)});
  const int64_t pad = (ops::kMxBlock - rows.size(1) % ops::kMxBlock) % ops::kMxBlock;
  if (pad) rows = torch::constant_pad_nd(rows, {0, pad});  // zeros: neither flushed nor subnormal
  const ops::MxTensor mx = ops::to_mxfp8(rows);
  const torch::Tensor block_scale =
      torch::exp2(mx.scales.to(torch::kFloat) - 127.0).repeat_interleave(ops::kMxBlock, /*dim=*/1);
  return {rows / block_scale, mx.data.to(torch::kFloat), 1.0, kE4m3Range};
}

Cast cast_to(const torch::Tensor& x, NumericFormat format, TensorRole role, int64_t margin, double loss_scale) {
  switch (format) {
    case NumericFormat::kBf16: return {x, x.to(torch::kBFloat16).to(torch::kFloat), 1.0, kBf16Range};
    case NumericFormat::kFp16: {
      const double scale = role == TensorRole::kGradOutput ? loss_scale : 1.0;
      const torch::Tensor scaled = x * scale;
      return {scaled, scaled.to(torch::kHalf).to(torch::kFloat), scale, kFp16Range};
    }
    case NumericFormat::kFp8:
      return cast_float8(x, role == TensorRole::kGradOutput ? ops::Float8::kE5M2 : ops::Float8::kE4M3, margin);
    case NumericFormat::kMxfp8: return cast_mxfp8(x);
  }
  MPT_CHECK(false, "unknown numeric format");
}

}  // namespace

const char* format_name(NumericFormat format) {
  for (const auto& [value, name] : kFormats)
    if (value == format) return name;
  return "?";
}

std::vector<NumericFormat> parse_formats(const std::string& list, const std::string& what) {
  std::vector<NumericFormat> formats;
  std::stringstream items(list);
  for (std::string item; std::getline(items, item, ',');) {
    const auto found = std::find_if(kFormats.begin(), kFormats.end(), [&](const auto& f) { return item == f.second; });
    if (found == kFormats.end())
      throw UsageError(what + ": '" + item + "' is not a format; expected bf16, fp16, fp8 or mxfp8");
    if (std::find(formats.begin(), formats.end(), found->first) == formats.end()) formats.push_back(found->first);
  }
  if (formats.empty()) throw UsageError(what + ": expected at least one of bf16, fp16, fp8, mxfp8");
  return formats;
}

std::optional<NumericFormat> training_format(Mode mode, const std::string& fp8_recipe) {
  switch (mode) {
    case Mode::kFp32: return std::nullopt;
    case Mode::kMixedBf16: return NumericFormat::kBf16;
    case Mode::kMixedFp16: return NumericFormat::kFp16;
    case Mode::kFp8: return fp8_recipe == "mxfp8" ? NumericFormat::kMxfp8 : NumericFormat::kFp8;
  }
  return std::nullopt;
}

void RangeStats::merge(const RangeStats& other) {
  if (other.min_nonzero > 0 && (min_nonzero == 0 || other.min_nonzero < min_nonzero)) min_nonzero = other.min_nonzero;
  if (other.amax >= amax) scale = other.scale;  // the scale of the widest tensor seen
  amax = std::max(amax, other.amax);
  values += other.values, flushed += other.flushed, subnormal += other.subnormal, saturated += other.saturated;
}

RangeStats range_stats(const torch::Tensor& x_in, NumericFormat format, TensorRole role, int64_t fp8_margin,
                       double loss_scale) {
  torch::NoGradGuard no_grad;
  const torch::Tensor x = x_in.detach().to(torch::kFloat);
  const Cast cast = cast_to(x, format, role, fp8_margin, loss_scale);
  const torch::Tensor nonzero = cast.scaled.ne(0);
  const torch::Tensor magnitude = x.abs();
  const torch::Tensor counts =
      torch::stack(
          {
              nonzero.logical_and(cast.rounded.eq(0)).sum(),
              nonzero.logical_and(cast.rounded.ne(0)).logical_and(cast.rounded.abs().lt(cast.range.min_normal)).sum(),
              cast.scaled.abs().ge(cast.range.overflow).sum(),
          })
          .cpu();
  RangeStats stats;
  stats.values = x.numel();
  stats.flushed = counts[0].item<int64_t>();
  stats.subnormal = counts[1].item<int64_t>();
  stats.saturated = counts[2].item<int64_t>();
  stats.amax = x.numel() ? magnitude.max().item<double>() : 0.0;
  const torch::Tensor nonzero_magnitudes = magnitude.masked_select(magnitude.gt(0));
  stats.min_nonzero = nonzero_magnitudes.numel() ? nonzero_magnitudes.min().item<double>() : 0.0;
  stats.scale = cast.scale;
  return stats;
}

LossScaleWindow fp16_loss_scale_window(const RangeStats& grad_output) {
  LossScaleWindow window;
  if (grad_output.amax > 0)
    window.without_overflow = std::exp2(std::floor(std::log2(kFp16Range.max / grad_output.amax)));
  if (grad_output.min_nonzero > 0)
    window.without_flush = std::exp2(std::ceil(std::log2(kFp16Range.min_subnormal / grad_output.min_nonzero)));
  return window;
}

}  // namespace mpt::precision
