// How a stack key is declared: its row of the key table and the member of ExperimentConfig that receives its value,
// in one call (run/stack_keys.cpp, run/stack_keys_training.cpp). The spec's text becomes the member's type here.
#pragma once

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <string>
#include <type_traits>
#include <utility>

#include "config/key_rows.h"
#include "run/stack_keys.h"

namespace mpt::run::stack {

using namespace config::rows;  // the row builders
template <typename T>
T read_value(const config::Spec& spec, const std::string& key) {
  if constexpr (std::is_same_v<T, bool>)
    return spec.get_bool(key);
  else if constexpr (std::is_same_v<T, std::string>)
    return spec.get_string(key);
  else if constexpr (std::is_same_v<T, std::vector<int64_t>>)
    return spec.get_int_list(key);
  else if constexpr (std::is_same_v<T, std::vector<std::string>>)
    return spec.get_string_list(key);
  else if constexpr (std::is_same_v<T, precision::LossScaleMode>)
    return precision::parse_loss_scale_mode(spec.get_string(key));
  else if constexpr (std::is_same_v<T, precision::Mode>)
    return precision::parse_mode(spec.get_string(key));
  else if constexpr (std::is_same_v<T, precision::Strategy>)
    return precision::parse_strategy(spec.get_string(key));
  else if constexpr (std::is_same_v<T, models::Recompute>)
    return models::parse_recompute(spec.get_string(key));
  else if constexpr (std::is_floating_point_v<T>)
    return static_cast<T>(spec.get_float(key));
  else
    return static_cast<T>(spec.get_int(key));
}

template <typename T>
std::string show_value(const T& value) {
  if constexpr (std::is_same_v<T, precision::LossScaleMode>)
    return precision::loss_scale_mode_name(value);
  else if constexpr (std::is_same_v<T, precision::Mode>)
    return precision::mode_name(value);
  else if constexpr (std::is_same_v<T, precision::Strategy>)
    return precision::strategy_name(value);
  else if constexpr (std::is_same_v<T, models::Recompute>)
    return models::recompute_name(value);
  else if constexpr (std::is_same_v<T, std::string>)
    return value;
  else if constexpr (std::is_floating_point_v<T>)
    return fmt::format("{:.17g}", static_cast<double>(value));
  else
    return fmt::format("{}", value);
}

// `path` is the chain of members from ExperimentConfig to the value, e.g. &ExperimentConfig::data,
// &data::DataConfig::batch_size.
template <typename... Members>
StackKey bind(config::KeySpec row, Members... path) {
  const std::string key = row.key;
  return {std::move(row),
          {key,
           [key, path...](const config::Spec& spec, ExperimentConfig& c) {
             auto& member = (c.*....*path);
             member = read_value<std::decay_t<decltype(member)>>(spec, key);
           },
           [path...](const ExperimentConfig& c) { return show_value((c.*....*path)); }}};
}

using E = ExperimentConfig;
using X = ExperimentSection;
using M = models::ModelConfig;
using D = data::DataConfig;
using P = precision::PrecisionConfig;
using L = precision::LossScaleConfig;
using F8 = precision::Fp8Config;
using O = train::OptimizerConfig;
using S = train::ScheduleConfig;
using T = train::TrainConfig;
using C = train::CheckpointConfig;
using V = hardware::DeviceConfig;
using R = distributed::DistributedConfig;
using G = train::DebugConfig;

}  // namespace mpt::run::stack
