// A validated experiment spec: every schema key with its value and where the value came from
// (file:line, an override, or the default). Only command wiring sees a whole Spec; components get structs.
#pragma once

#include <yaml-cpp/yaml.h>

#include <cstdint>
#include <map>
#include <string>
#include <vector>

namespace mpt::config {

struct SpecValue {
  YAML::Node node;
  std::string origin;  // "exp.yaml:12", "override optimizer.lr=3e-4", or "default"
};

class Spec {
 public:
  Spec() = default;
  explicit Spec(std::string source_path) : source_path_(std::move(source_path)) {}

  int64_t get_int(const std::string& key) const;
  double get_float(const std::string& key) const;
  bool get_bool(const std::string& key) const;
  std::string get_string(const std::string& key) const;
  std::vector<int64_t> get_int_list(const std::string& key) const;
  std::vector<std::string> get_string_list(const std::string& key) const;
  std::string value_text(const std::string& key) const;  // one line of YAML, credentials masked (common/uri.h)

  // Sets a schema key (resolution writes "mixed" -> "mixed_bf16" here); the origin says why.
  void set(const std::string& key, const YAML::Node& node, const std::string& origin);
  bool has(const std::string& key) const { return values_.count(key) > 0; }
  void erase(const std::string& key) { values_.erase(key); }  // back to the default when defaults are filled
  const std::string& origin(const std::string& key) const;
  const std::string& source_path() const { return source_path_; }

  // The spec as nested YAML, re-loadable by `mpt train` (credentials in URIs masked: they are given again).
  std::string to_yaml() const;
  // The spec as an aligned key | value | origin table, printed before step 0: the keys that apply to this spec
  // (config/relevance.h) and a line counting the others, or every key when `all`.
  std::string to_table(bool all = false) const;

 private:
  const SpecValue& at(const std::string& key) const;

  std::string source_path_;
  std::map<std::string, SpecValue> values_;
};

// A schema key whose value differs between two specs, with both values as one line of YAML.
struct KeyDifference {
  std::string key;
  std::string a_value;
  std::string b_value;
};

// Every schema key, in schema order, whose value differs between `a` and `b`.
std::vector<KeyDifference> differing_keys(const Spec& a, const Spec& b);

// Renders a YAML value on one line (flow style): "0.001", "[512, 256]".
std::string yaml_inline(const YAML::Node& node);

}  // namespace mpt::config
