#include "common/keys.h"

#include <fmt/format.h>
#include <fmt/ranges.h>

namespace mpt::keys {

const char* key_type_name(KeyType type) {
  switch (type) {
    case KeyType::kInt: return "integer";
    case KeyType::kFloat: return "number";
    case KeyType::kBool: return "boolean";
    case KeyType::kString: return "string";
    case KeyType::kIntList: return "list of integers";
    case KeyType::kStringList: return "list of strings";
  }
  return "?";
}

std::string default_text(int64_t value) { return std::to_string(value); }
// The shortest text that reads back as the same double, with a point so that YAML keeps it a number of its own.
std::string default_text(double value) {
  std::string text = fmt::format("{}", value);
  if (text.find_first_of(".eEn") == std::string::npos) text += ".0";
  return text;
}
std::string default_text(bool value) { return value ? "true" : "false"; }
std::string default_text(const std::string& value) { return value.empty() ? "\"\"" : value; }
std::string default_text(const std::vector<int64_t>& values) { return fmt::format("[{}]", fmt::join(values, ", ")); }
std::string default_text(const std::vector<std::string>& values) {
  return fmt::format("[{}]", fmt::join(values, ", "));
}

}  // namespace mpt::keys
