#include "config/relevance.h"

#include <algorithm>
#include <map>
#include <vector>

#include <yaml-cpp/yaml.h>

#include "config/schema.h"
#include "config/spec.h"

namespace mpt::config {
namespace {

// Keys that belong to one choice of another key: the key (or a prefix ending in '.') and the values (or value
// prefixes ending in '*') of the deciding key under which it applies.
struct Condition {
  std::vector<std::string> keys;
  std::string deciding_key;
  std::vector<std::string> values;
};

std::vector<Condition> fixed_conditions() {
  return {
      {{"precision.fp8."}, "precision.mode", {"fp8"}},
      {{"precision.loss_scale.init", "precision.loss_scale.growth_factor", "precision.loss_scale.backoff_factor",
        "precision.loss_scale.growth_interval", "precision.loss_scale.hysteresis", "precision.loss_scale.min_scale",
        "precision.loss_scale.max_scale", "precision.loss_scale.max_overflows_at_min"},
       "precision.loss_scale.mode",
       {"dynamic", "static", "auto"}},
      {{"optimizer.momentum", "optimizer.nesterov"}, "optimizer.name", {"sgd"}},
      {{"optimizer.beta1", "optimizer.beta2", "optimizer.eps"}, "optimizer.name", {"adam", "adamw"}},
      {{"schedule.step_size", "schedule.gamma"}, "schedule.name", {"step"}},
      {{"schedule.min_lr_ratio"}, "schedule.name", {"linear", "cosine"}},
  };
}

// One condition per key a plug-in declares or enables: the names of every plug-in that does.
std::vector<Condition> plugin_conditions() {
  std::map<std::string, Condition> by_key;
  for (const auto& group : plugin_key_groups()) {
    if (group.deciding_key.empty()) continue;  // its keys always apply
    std::vector<std::string> keys = group.enables;
    for (const auto& key : group.keys) keys.push_back(key.key);
    for (const auto& key : keys) {
      Condition& condition = by_key.try_emplace(key, Condition{{key}, group.deciding_key, {}}).first->second;
      condition.values.insert(condition.values.end(), group.names.begin(), group.names.end());
    }
  }
  std::vector<Condition> table;
  for (auto& [key, condition] : by_key) table.push_back(std::move(condition));
  return table;
}

const std::vector<Condition>& conditions() {
  static const std::vector<Condition> table = [] {
    schema();  // the plug-ins' keys are all in
    std::vector<Condition> all = fixed_conditions();
    for (auto& condition : plugin_conditions()) all.push_back(std::move(condition));
    return all;
  }();
  return table;
}

bool matches(const std::string& text, const std::string& pattern) {
  if (!pattern.empty() && pattern.back() == '*') return text.rfind(pattern.substr(0, pattern.size() - 1), 0) == 0;
  if (!pattern.empty() && pattern.back() == '.') return text.rfind(pattern, 0) == 0;
  return text == pattern;
}

// The condition under which `key` applies, or null when it always does.
const Condition* governing(const std::string& key) {
  for (const auto& condition : conditions())
    for (const auto& pattern : condition.keys)
      if (matches(key, pattern)) return &condition;
  return nullptr;
}

bool holds(const Condition& condition, const Spec& spec) {
  const std::string value = spec.get_string(condition.deciding_key);
  return std::any_of(condition.values.begin(), condition.values.end(),
                     [&](const std::string& allowed) { return matches(value, allowed); });
}

std::string default_text(const std::string& key) { return yaml_inline(YAML::Load(find_key(key)->default_yaml)); }

}  // namespace

bool applies(const std::string& key, const Spec& spec) {
  if (spec.origin(key) != "default") return true;
  if (key.rfind("debug.", 0) == 0 || key.rfind("tracking.", 0) == 0) return false;
  const Condition* condition = governing(key);
  return !condition || holds(*condition, spec);
}

std::vector<InertKey> inert_keys(const Spec& spec) {
  std::vector<InertKey> inert;
  for (const auto& key_spec : schema()) {
    const Condition* condition = governing(key_spec.key);
    if (!condition || !spec.has(key_spec.key) || holds(*condition, spec)) continue;
    if (spec.value_text(key_spec.key) == default_text(key_spec.key)) continue;  // config.yaml writes every default
    std::string allowed;
    for (const auto& value : condition->values) allowed += (allowed.empty() ? "" : ", ") + value;
    inert.push_back({key_spec.key, condition->deciding_key, spec.get_string(condition->deciding_key), allowed});
  }
  return inert;
}

}  // namespace mpt::config
