// Spec keys as plug-ins declare them: a key's row (type, default, bounds, choices, meaning), the values a plug-in
// receives for its own keys, and the table that binds each of a plug-in's keys to a member of its config struct,
// so that the key is declared once, where it is used. config/ assembles the whole key table from these rows.
#pragma once

#include <cstdint>
#include <functional>
#include <limits>
#include <map>
#include <string>
#include <type_traits>
#include <variant>
#include <vector>

namespace mpt::keys {

enum class KeyType { kInt, kFloat, kBool, kString, kIntList, kStringList };

const char* key_type_name(KeyType type);

struct KeySpec {
  std::string key;  // dotted path, e.g. "precision.loss_scale.init"
  KeyType type = KeyType::kString;
  std::string default_yaml;          // the default, written as YAML ("2000", "[512]", "fp32", "\"\"")
  std::vector<std::string> choices;  // for enum-like strings; empty means free text
  double min = -std::numeric_limits<double>::infinity();  // inclusive bounds for numbers
  double max = std::numeric_limits<double>::infinity();
  bool min_exclusive = false;
  bool max_exclusive = false;
  std::string doc;
  bool resumable = false;  // may differ from the run directory's config.yaml when a run resumes
  bool is_path = false;    // a file or folder, taken relative to the spec's folder when not found from here

  KeySpec& between(double low, double high) {
    min = low, max = high;
    return *this;
  }
  KeySpec& strictly_between(double low, double high) {
    min = low, max = high, min_exclusive = max_exclusive = true;
    return *this;
  }
  KeySpec& one_of(std::vector<std::string> values) {
    choices = std::move(values);
    return *this;
  }
  KeySpec& path() {
    is_path = true;
    return *this;
  }
  KeySpec& may_differ_on_resume() {
    resumable = true;
    return *this;
  }
};

// A key's value as a plug-in receives it.
using Value = std::variant<int64_t, double, bool, std::string, std::vector<int64_t>, std::vector<std::string>>;

// The values of a plug-in's own keys, by key. A key that is not here keeps its default.
class Options {
 public:
  void set(const std::string& key, Value value) { values_[key] = std::move(value); }
  const Value* find(const std::string& key) const {
    auto it = values_.find(key);
    return it == values_.end() ? nullptr : &it->second;
  }
  bool empty() const { return values_.empty(); }

 private:
  std::map<std::string, Value> values_;
};

// The keys of a plug-in that apply only when `deciding_key` names it (model.name: resnet50), the names it answers
// to (added to the deciding key's choices), and keys declared elsewhere that it gives a meaning to (a family with
// blocks to recompute makes memory.activation_checkpointing apply). Without a deciding key (a tracker's keys) the
// keys always apply.
struct KeyGroup {
  std::string deciding_key;
  std::vector<std::string> names;
  std::vector<KeySpec> keys;
  std::vector<std::string> enables;
};

std::string default_text(int64_t value);
std::string default_text(double value);
std::string default_text(bool value);
std::string default_text(const std::string& value);
std::string default_text(const std::vector<int64_t>& values);
std::string default_text(const std::vector<std::string>& values);

// A plug-in's keys bound to the members of its config struct. Each row's type and default come from the member
// and the struct's own default, so neither is written twice.
template <typename Config>
class OptionTable {
 public:
  template <typename T>
  KeySpec& add(std::string key, T Config::*member, std::string doc) {
    static_assert(std::is_constructible_v<Value, T>,
                  "a plug-in key's member is int64_t, double, bool, a string or a list");
    readers_.push_back([key, member](const Options& options, Config& config) {
      if (const Value* value = options.find(key)) config.*member = std::get<T>(*value);
    });
    KeySpec& row = keys_.emplace_back();
    row.key = std::move(key);
    row.type = type_of<T>();
    row.default_yaml = default_text(Config{}.*member);
    row.doc = std::move(doc);
    return row;
  }

  // `base` with the values `options` holds for these keys.
  Config read(const Options& options, Config base = Config{}) const {
    for (const auto& read_into : readers_) read_into(options, base);
    return base;
  }
  const std::vector<KeySpec>& keys() const { return keys_; }

 private:
  template <typename T>
  static KeyType type_of() {
    if constexpr (std::is_same_v<T, bool>)
      return KeyType::kBool;
    else if constexpr (std::is_same_v<T, int64_t>)
      return KeyType::kInt;
    else if constexpr (std::is_same_v<T, double>)
      return KeyType::kFloat;
    else if constexpr (std::is_same_v<T, std::string>)
      return KeyType::kString;
    else if constexpr (std::is_same_v<T, std::vector<int64_t>>)
      return KeyType::kIntList;
    else
      return KeyType::kStringList;
  }

  std::vector<KeySpec> keys_;
  std::vector<std::function<void(const Options&, Config&)>> readers_;
};

}  // namespace mpt::keys
