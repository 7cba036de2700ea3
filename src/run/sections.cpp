// Spec -> component config structs: each key of the table (config/schema.cpp) bound once to its member.
#include "run/sections.h"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <map>

#include "common/error.h"
#include "config/schema.h"
#include "data/datasets.h"

namespace mpt::run {
namespace {

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
KeyBinding binding(std::string key, Members... path) {
  return {key,
          [key, path...](const config::Spec& spec, ExperimentConfig& c) {
            auto& member = (c.*....*path);
            member = read_value<std::decay_t<decltype(member)>>(spec, key);
          },
          [path...](const ExperimentConfig& c) { return show_value((c.*....*path)); }};
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

std::vector<KeyBinding> experiment_and_model_bindings() {
  return {
      binding("experiment.name", &E::experiment, &X::name),
      binding("experiment.seed", &E::experiment, &X::seed),
      binding("experiment.output_root", &E::experiment, &X::output_root),
      binding("model.name", &E::model, &M::name),
      binding("model.dropout", &E::model, &M::dropout),
      binding("model.init_from", &E::model, &M::init_from),
      binding("model.init_skip", &E::model, &M::init_skip),
  };
}

std::vector<KeyBinding> data_bindings() {
  return {
      binding("data.name", &E::data, &D::name),
      binding("data.root", &E::data, &D::root),
      binding("data.batch_size", &E::data, &D::batch_size),
      binding("data.shuffle", &E::data, &D::shuffle),
      binding("data.train_limit", &E::data, &D::train_limit),
      binding("data.test_limit", &E::data, &D::test_limit),
  };
}

std::vector<KeyBinding> precision_bindings() {
  return {
      binding("precision.mode", &E::precision, &P::mode),
      binding("precision.strategy", &E::precision, &P::strategy),
      binding("precision.fp32_modules", &E::precision, &P::fp32_modules),
      binding("precision.tf32", &E::precision, &P::tf32),
      binding("precision.fp8.recipe", &E::precision, &P::fp8, &F8::recipe),
      binding("precision.fp8.amax_history", &E::precision, &P::fp8, &F8::amax_history),
      binding("precision.fp8.margin", &E::precision, &P::fp8, &F8::margin),
      binding("precision.loss_scale.mode", &E::precision, &P::loss_scale, &L::mode),
      binding("precision.loss_scale.init", &E::precision, &P::loss_scale, &L::init),
      binding("precision.loss_scale.growth_factor", &E::precision, &P::loss_scale, &L::growth_factor),
      binding("precision.loss_scale.backoff_factor", &E::precision, &P::loss_scale, &L::backoff_factor),
      binding("precision.loss_scale.growth_interval", &E::precision, &P::loss_scale, &L::growth_interval),
      binding("precision.loss_scale.hysteresis", &E::precision, &P::loss_scale, &L::hysteresis),
      binding("precision.loss_scale.min_scale", &E::precision, &P::loss_scale, &L::min_scale),
      binding("precision.loss_scale.max_scale", &E::precision, &P::loss_scale, &L::max_scale),
      binding("precision.loss_scale.max_overflows_at_min", &E::precision, &P::loss_scale, &L::max_overflows_at_min),
  };
}

std::vector<KeyBinding> training_bindings() {
  return {
      binding("optimizer.name", &E::optimizer, &O::name),
      binding("optimizer.lr", &E::optimizer, &O::lr),
      binding("optimizer.momentum", &E::optimizer, &O::momentum),
      binding("optimizer.nesterov", &E::optimizer, &O::nesterov),
      binding("optimizer.weight_decay", &E::optimizer, &O::weight_decay),
      binding("optimizer.beta1", &E::optimizer, &O::beta1),
      binding("optimizer.beta2", &E::optimizer, &O::beta2),
      binding("optimizer.eps", &E::optimizer, &O::eps),
      binding("schedule.name", &E::schedule, &S::name),
      binding("schedule.warmup_steps", &E::schedule, &S::warmup_steps),
      binding("schedule.step_size", &E::schedule, &S::step_size),
      binding("schedule.gamma", &E::schedule, &S::gamma),
      binding("schedule.min_lr_ratio", &E::schedule, &S::min_lr_ratio),
      binding("schedule.base_batch_size", &E::schedule, &S::base_batch_size),
      binding("train.epochs", &E::train, &T::epochs),
      binding("train.max_steps", &E::train, &T::max_steps),
      binding("train.log_every_steps", &E::train, &T::log_every_steps),
      binding("train.eval_every_steps", &E::train, &T::eval_every_steps),
      binding("train.eval_batch_size", &E::train, &T::eval_batch_size),
      binding("train.grad_clip_norm", &E::train, &T::grad_clip_norm),
      binding("train.grad_accum_steps", &E::train, &T::grad_accum_steps),
      binding("train.max_consecutive_skips", &E::train, &T::max_consecutive_skips),
      binding("train.progress", &E::train, &T::progress),
      binding("checkpoint.every_steps", &E::checkpoint, &C::every_steps),
      binding("checkpoint.keep_last", &E::checkpoint, &C::keep_last),
      binding("memory.activation_checkpointing", &E::memory, &models::MemoryConfig::activation_checkpointing),
  };
}

std::vector<KeyBinding> system_bindings() {
  return {
      binding("device.type", &E::device, &V::type),
      binding("device.threads", &E::device, &V::threads),
      binding("distributed.backend", &E::distributed, &R::backend),
      binding("distributed.timeout_sec", &E::distributed, &R::timeout_sec),
      binding("distributed.bucket_mb", &E::distributed, &R::bucket_mb),
      binding("distributed.sync_batchnorm", &E::distributed, &R::sync_batchnorm),
      binding("distributed.shard_optimizer", &E::distributed, &R::shard_optimizer),
      binding("debug.check_numerics", &E::debug, &G::check_numerics),
      binding("debug.inject_nonfinite_grad_at", &E::debug, &G::inject_nonfinite_grad_at),
      binding("debug.inject_nonfinite_param", &E::debug, &G::inject_nonfinite_param),
      binding("debug.stop_after_steps", &E::debug, &G::stop_after_steps),
      binding("debug.inject_nonfinite_rank", &E::debug, &G::inject_nonfinite_rank),
      binding("debug.die_at_step", &E::debug, &G::die_at_step),
      binding("debug.forbid_host_syncs", &E::debug, &G::forbid_host_syncs),
      binding("debug.slow_down", &E::debug, &G::slow_down),
  };
}

std::vector<KeyBinding> all_bindings() {
  std::vector<KeyBinding> all;
  for (auto part :
       {experiment_and_model_bindings, data_bindings, precision_bindings, training_bindings, system_bindings})
    for (auto& binding : part()) all.push_back(std::move(binding));
  return all;
}

bool is_plugin_key(const std::string& key) {
  for (const auto& group : config::plugin_key_groups())
    for (const auto& row : group.keys)
      if (row.key == key) return true;
  return false;
}

keys::Value plugin_value(const config::Spec& spec, const config::KeySpec& row) {
  switch (row.type) {
    case config::KeyType::kInt: return spec.get_int(row.key);
    case config::KeyType::kFloat: return spec.get_float(row.key);
    case config::KeyType::kBool: return spec.get_bool(row.key);
    case config::KeyType::kString: return spec.get_string(row.key);
    case config::KeyType::kIntList: return spec.get_int_list(row.key);
    case config::KeyType::kStringList: return spec.get_string_list(row.key);
  }
  throw Error("unknown key type of " + row.key);
}

// The bindings in the key table's order, after checking that they list every key of the stack (the plug-ins read
// their own) once each.
std::vector<KeyBinding> checked_bindings() {
  std::map<std::string, KeyBinding> by_key;
  for (auto& binding : all_bindings()) {
    const std::string key = binding.key;
    if (!by_key.emplace(key, std::move(binding)).second) throw Error("run/sections.cpp binds " + key + " twice");
  }
  std::vector<KeyBinding> ordered;
  for (const auto& row : config::schema()) {
    if (is_plugin_key(row.key)) continue;
    auto found = by_key.find(row.key);
    if (found == by_key.end()) throw Error("run/sections.cpp binds no member to the spec key " + row.key);
    ordered.push_back(std::move(found->second));
    by_key.erase(found);
  }
  if (!by_key.empty()) throw Error("run/sections.cpp binds " + by_key.begin()->first + ", which is no spec key");
  return ordered;
}

}  // namespace

const std::vector<KeyBinding>& key_bindings() {
  static const std::vector<KeyBinding> bindings = checked_bindings();
  return bindings;
}

ExperimentConfig read_sections(const config::Spec& spec) {
  ExperimentConfig c;
  for (const auto& binding : key_bindings()) binding.read(spec, c);
  keys::Options data_options;  // the dataset's own keys, which it reads itself
  for (const auto& row : config::schema()) {
    if (!is_plugin_key(row.key)) continue;
    const std::string section = row.key.substr(0, row.key.find('.'));
    keys::Options* options = section == "model"      ? &c.model.options
                             : section == "data"     ? &data_options
                             : section == "tracking" ? &c.tracking
                                                     : nullptr;
    if (!options) throw Error("a plug-in key in no section that takes them: " + row.key);
    options->set(row.key, plugin_value(spec, row));
  }
  c.data = data::read_options(data_options, c.data);
  c.schedule.peak_lr = c.optimizer.lr;  // before the linear scaling rule, which the wiring applies
  return c;
}

}  // namespace mpt::run
