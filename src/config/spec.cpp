// Typed access to a validated spec, and its two renderings (YAML for the run directory, a table for people).
#include "config/spec.h"

#include <algorithm>
#include <sstream>

#include "common/echo.h"
#include "common/error.h"
#include "common/uri.h"
#include "config/relevance.h"
#include "config/schema.h"

namespace mpt::config {

const SpecValue& Spec::at(const std::string& key) const {
  auto it = values_.find(key);
  MPT_CHECK(it != values_.end(), "spec key '" + key + "' is not set; is it in the schema?");
  return it->second;
}

int64_t Spec::get_int(const std::string& key) const { return at(key).node.as<int64_t>(); }
double Spec::get_float(const std::string& key) const { return at(key).node.as<double>(); }
bool Spec::get_bool(const std::string& key) const { return at(key).node.as<bool>(); }
std::string Spec::get_string(const std::string& key) const {
  const auto& node = at(key).node;
  return node.IsNull() ? "" : node.as<std::string>();
}
std::vector<int64_t> Spec::get_int_list(const std::string& key) const {
  return at(key).node.as<std::vector<int64_t>>();
}
std::vector<std::string> Spec::get_string_list(const std::string& key) const {
  return at(key).node.as<std::vector<std::string>>();
}

namespace {

// The node with credentials in its strings masked (common/uri.h); itself when it holds none.
YAML::Node without_credentials(const YAML::Node& node) {
  if (node.IsScalar()) {
    const std::string masked = redact_credentials(node.Scalar());
    return masked == node.Scalar() ? node : YAML::Node(masked);
  }
  if (!node.IsSequence()) return node;
  YAML::Node out(YAML::NodeType::Sequence);
  for (const auto& item : node) out.push_back(without_credentials(item));
  return out;
}

// A value in the spec table: a long one is cut (with its length), so it never widens every row.
constexpr size_t kTableValueBytes = 60;

}  // namespace

std::string Spec::value_text(const std::string& key) const { return yaml_inline(without_credentials(at(key).node)); }

std::vector<KeyDifference> differing_keys(const Spec& a, const Spec& b) {
  std::vector<KeyDifference> differences;
  for (const auto& key_spec : schema()) {
    std::string a_value = a.value_text(key_spec.key), b_value = b.value_text(key_spec.key);
    if (a_value != b_value) differences.push_back({key_spec.key, std::move(a_value), std::move(b_value)});
  }
  return differences;
}

void Spec::set(const std::string& key, const YAML::Node& node, const std::string& origin) {
  MPT_CHECK(find_key(key) != nullptr, "setting unknown spec key '" + key + "'");
  values_[key] = SpecValue{YAML::Clone(node), origin};
}

const std::string& Spec::origin(const std::string& key) const { return at(key).origin; }

std::string yaml_inline(const YAML::Node& node) {
  YAML::Emitter out;
  out.SetSeqFormat(YAML::Flow);
  out.SetMapFormat(YAML::Flow);
  out << node;
  return out.c_str();
}

std::string Spec::to_yaml() const {
  // Build the nested document in schema order so the file reads like the docs.
  YAML::Emitter out;
  out << YAML::BeginMap;
  std::vector<std::string> open;  // the currently open section path
  for (const auto& key_spec : schema()) {
    auto it = values_.find(key_spec.key);
    if (it == values_.end()) continue;
    std::vector<std::string> parts;
    std::stringstream split(key_spec.key);
    for (std::string part; std::getline(split, part, '.');) parts.push_back(part);
    size_t common = 0;
    while (common < open.size() && common + 1 < parts.size() && open[common] == parts[common]) ++common;
    for (size_t i = open.size(); i > common; --i) out << YAML::EndMap;
    open.resize(common);
    for (size_t i = common; i + 1 < parts.size(); ++i) {
      out << YAML::Key << parts[i] << YAML::Value << YAML::BeginMap;
      open.push_back(parts[i]);
    }
    out << YAML::Key << parts.back() << YAML::Value;
    if (it->second.node.IsSequence()) out << YAML::Flow;
    out << without_credentials(it->second.node);
  }
  for (size_t i = 0; i < open.size(); ++i) out << YAML::EndMap;
  out << YAML::EndMap;
  return std::string(out.c_str()) + "\n";
}

std::string Spec::to_table(bool all) const {
  size_t key_width = 3, value_width = 5, left_out = 0;
  std::vector<std::pair<std::string, std::string>> rows;
  for (const auto& key_spec : schema()) {
    auto it = values_.find(key_spec.key);
    if (it == values_.end()) continue;
    if (!all && !applies(key_spec.key, *this)) {
      ++left_out;
      continue;
    }
    rows.emplace_back(key_spec.key, echo(value_text(key_spec.key), kTableValueBytes));
    key_width = std::max(key_width, key_spec.key.size());
    value_width = std::max(value_width, rows.back().second.size());
  }
  std::ostringstream out;
  auto line = [&](const std::string& k, const std::string& v, const std::string& o) {
    out << k << std::string(key_width - k.size() + 2, ' ') << v << std::string(value_width - v.size() + 2, ' ') << o
        << "\n";
  };
  line("key", "value", "from");
  out << std::string(key_width + value_width + 12, '-') << "\n";
  for (const auto& [key, value] : rows) line(key, value, values_.at(key).origin);
  if (left_out > 0)
    out << left_out
        << " keys at their defaults that do not apply here (other model families, data, optimizers, schedules, "
           "precision modes; debug and tracking) left out: --all-keys shows every key, and config.yaml holds them\n";
  return out.str();
}

}  // namespace mpt::config
