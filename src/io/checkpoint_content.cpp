// See checkpoint_content.h.
#include "io/checkpoint_content.h"

#include <fmt/format.h>

#include <limits>

namespace mpt::io {
bool second_moment(const std::string& field) { return field == "exp_avg_sq" || field == "max_exp_avg_sq"; }

std::string tensor_problem(const std::string& name, const torch::Tensor& tensor, bool non_negative) {
  if (!tensor.defined() || !tensor.is_floating_point() || tensor.numel() == 0) return "";
  const torch::Tensor values = tensor.detach().to(torch::kCPU);
  if (const int64_t bad = values.isfinite().logical_not().sum().item<int64_t>(); bad > 0)
    return fmt::format("tensor '{}' holds {} non-finite value{} (NaN or Inf) of {}", name, bad, bad == 1 ? "" : "s",
                       values.numel());
  if (non_negative)
    if (const int64_t negative = (values < 0).sum().item<int64_t>(); negative > 0)
      return fmt::format("tensor '{}' holds {} negative value{} (a second moment is never negative)", name, negative,
                         negative == 1 ? "" : "s");
  return "";
}

std::string nonfinite_tensor(const torch::OrderedDict<std::string, torch::Tensor>& saved) {
  for (const auto& item : saved)
    if (std::string problem = tensor_problem(item.key(), item.value(), false); !problem.empty()) return problem;
  return "";
}

std::string training_state_problem(const TrainingState& state) {
  if (state.step < 0 || state.applied_steps < 0 || state.skipped_steps < 0 ||
      state.applied_steps + state.skipped_steps != state.step)
    return fmt::format("state.step {} is not state.applied_steps {} + state.skipped_steps {}", state.step,
                       state.applied_steps, state.skipped_steps);
  if (state.data.epoch < 0 || state.data.batch < 0 || state.data.batch_samples < 0)
    return fmt::format("state.data_epoch {} / state.data_batch {}: expected positions >= 0", state.data.epoch,
                       state.data.batch);
  constexpr double kFp32Max = std::numeric_limits<float>::max();
  for (const auto& [name, value] :
       {std::pair{"scaler.scale", state.scaler.scale}, std::pair{"scaler.lowest_scale", state.scaler.lowest_scale}})
    if (!(value > 0 && value <= kFp32Max))
      return fmt::format("{} = {}: expected a loss scale in (0, 3.40282e+38], FP32's positive finite range", name,
                         value);
  if (state.scaler.growth_tracker < 0 || state.scaler.backoffs < 0 || state.scaler.growths < 0 ||
      state.scaler.hysteresis_left < 0 || state.scaler.overflows_at_min < 0)
    return "a negative loss-scaler counter (scaler.growth_tracker, backoffs, growths, hysteresis_left or "
           "overflows_at_min)";
  return "";
}

}  // namespace mpt::io
