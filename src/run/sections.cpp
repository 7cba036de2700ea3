// Spec -> component config structs: the stack keys through their bindings (run/stack_keys.h), the plug-ins' keys
// into their sections' options.
#include "run/sections.h"

#include <set>

#include "common/error.h"
#include "config/schema.h"
#include "data/datasets.h"
#include "run/stack_keys.h"

namespace mpt::run {
namespace {

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

// The stack keys' bindings, each key once.
std::vector<KeyBinding> checked_bindings() {
  std::vector<KeyBinding> bindings;
  std::set<std::string> keys;
  for (StackKey& key : stack_keys()) {
    if (!keys.insert(key.row.key).second) throw Error("run/stack_keys declares " + key.row.key + " twice");
    bindings.push_back(std::move(key.binding));
  }
  return bindings;
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
