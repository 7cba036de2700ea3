// The one table of every spec key: its type, default, allowed values and meaning.
// Loading, validation, `mpt train --help-spec` and docs/spec.md all read this table; nothing else lists keys.
#pragma once

#include <limits>
#include <string>
#include <vector>

namespace mpt::config {

enum class KeyType { kInt, kFloat, kBool, kString, kIntList, kStringList };

const char* key_type_name(KeyType type);

struct KeySpec {
  std::string key;            // dotted path, e.g. "precision.loss_scale.init"
  KeyType type;
  std::string default_yaml;   // the default, written as YAML ("2000", "[512]", "fp32", "\"\"")
  std::vector<std::string> choices;  // for enum-like strings; empty means free text
  double min = -std::numeric_limits<double>::infinity();  // inclusive bounds for numbers
  double max = std::numeric_limits<double>::infinity();
  bool min_exclusive = false;
  bool max_exclusive = false;
  std::string doc;
};

const std::vector<KeySpec>& schema();
const KeySpec* find_key(const std::string& key);

// "did you mean" for an unknown key: the closest known key, or "" when nothing is close.
std::string closest_key(const std::string& unknown);

// What a value must be, in words: "an integer >= 1", "one of fp32, mixed, ...".
std::string describe_allowed(const KeySpec& spec);

}  // namespace mpt::config
