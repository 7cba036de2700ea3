// The one table of every spec key: its type, default, allowed values and meaning.
// Loading, validation, resume checks, `mpt keys` and docs/spec.md all read this table; run/sections.cpp binds
// each row to the member of the config struct that receives it.
#pragma once

#include <limits>
#include <string>
#include <vector>

namespace mpt::config {

enum class KeyType { kInt, kFloat, kBool, kString, kIntList, kStringList };

const char* key_type_name(KeyType type);

struct KeySpec {
  std::string key;  // dotted path, e.g. "precision.loss_scale.init"
  KeyType type;
  std::string default_yaml;          // the default, written as YAML ("2000", "[512]", "fp32", "\"\"")
  std::vector<std::string> choices;  // for enum-like strings; empty means free text
  double min = -std::numeric_limits<double>::infinity();  // inclusive bounds for numbers
  double max = std::numeric_limits<double>::infinity();
  bool min_exclusive = false;
  bool max_exclusive = false;
  std::string doc;
  bool resumable = false;  // may differ from the run directory's config.yaml when a run resumes
};

const std::vector<KeySpec>& schema();
const KeySpec* find_key(const std::string& key);

// Whether `key` may change between a run and its resumption (an unknown key may not).
bool may_differ_on_resume(const std::string& key);

// "did you mean" for an unknown key: the closest known key, or "" when nothing is close.
std::string closest_key(const std::string& unknown);

// What a value must be, in words: "an integer >= 1", "one of fp32, mixed, ...".
std::string describe_allowed(const KeySpec& spec);

}  // namespace mpt::config
