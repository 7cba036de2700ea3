// See checkpoint_content.h.
#include "io/checkpoint_content.h"

#include <fmt/format.h>

#include <map>

namespace mpt::io {
namespace {

// What is wrong with one tensor, or "".
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

// torch::optim's state keys (a parameter's TensorImpl address when saved) -> the parameter's position, read from
// param_groups: param_groups/<g>: params/<i>.
std::map<std::string, size_t> parameter_positions(torch::serialize::InputArchive& optimizer) {
  std::map<std::string, size_t> positions;
  torch::serialize::InputArchive all_groups, groups;
  if (!optimizer.try_read("param_groups", all_groups)) return positions;
  for (int64_t g = 0, position = 0;; ++g) {
    if (!all_groups.try_read("param_groups/" + std::to_string(g), groups)) break;
    torch::Tensor count;
    if (!groups.try_read("params/size", count)) break;
    for (int64_t i = 0; i < count.item<int64_t>(); ++i, ++position) {
      c10::IValue key;
      if (groups.try_read("params/" + std::to_string(i), key) && key.isString())
        positions[key.toStringRef()] = static_cast<size_t>(position);
    }
  }
  return positions;
}

}  // namespace

std::string nonfinite_tensor(const torch::OrderedDict<std::string, torch::Tensor>& saved) {
  for (const auto& item : saved)
    if (std::string problem = tensor_problem(item.key(), item.value(), false); !problem.empty()) return problem;
  return "";
}

std::string optimizer_state_problem(torch::serialize::InputArchive& optimizer,
                                    const std::vector<std::string>& parameter_names) {
  torch::serialize::InputArchive states;
  if (!optimizer.try_read("state", states)) return "";
  const std::map<std::string, size_t> positions = parameter_positions(optimizer);
  for (const std::string& key : states.keys()) {
    torch::serialize::InputArchive state;
    if (!states.try_read(key, state)) continue;
    const auto position = positions.find(key);
    const std::string parameter = position != positions.end() && position->second < parameter_names.size()
                                      ? parameter_names[position->second]
                                      : "#" + key;
    for (const std::string& field : state.keys()) {
      torch::Tensor tensor;
      if (!state.try_read(field, tensor)) continue;
      const bool second_moment = field == "exp_avg_sq" || field == "max_exp_avg_sq";
      if (std::string problem = tensor_problem("optimizer." + field + " of " + parameter, tensor, second_moment);
          !problem.empty())
        return problem;
    }
  }
  return "";
}

}  // namespace mpt::io
