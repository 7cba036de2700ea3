// Spec loading: parse, flatten nested sections to dotted keys, apply overrides, fill defaults, type-check.
#include "config/load.h"

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <map>
#include <sstream>

#include "common/echo.h"
#include "common/error.h"
#include "common/files.h"
#include "common/uri.h"
#include "config/schema.h"

namespace mpt::config {
namespace {

bool is_section(const std::string& prefix) {
  for (const auto& spec : schema())
    if (spec.key.compare(0, prefix.size() + 1, prefix + ".") == 0) return true;
  return false;
}

std::string unknown_key_message(const std::string& where, const std::string& key) {
  std::string message = where + ": unknown key '" + echo(key) + "'";
  std::string suggestion = closest_key(key);
  if (!suggestion.empty())
    message += "; did you mean '" + suggestion + "'?";
  else
    message += "; see docs/spec.md for every key";
  return message;
}

bool is_integer_scalar(const YAML::Node& node, int64_t* value) {
  try {
    *value = node.as<int64_t>();
    return true;
  } catch (const YAML::Exception&) {
    return false;
  }
}

bool in_range(const KeySpec& spec, double v) {
  const bool low = spec.min_exclusive ? v > spec.min : v >= spec.min;
  const bool high = spec.max_exclusive ? v < spec.max : v <= spec.max;
  return std::isfinite(v) && low && high;
}

// Names and paths reach file names, logs and terminals: a control character there is never meant.
bool has_control_characters(const std::string& text) {
  return std::any_of(text.begin(), text.end(), [](unsigned char c) { return c < 0x20 || c == 0x7f; });
}
constexpr const char* kNoControlCharacters = "control characters (such as newlines or escapes) are not allowed";

std::string check_number(const KeySpec& spec, const YAML::Node& node, const std::string& expected) {
  if (!node.IsScalar()) return expected;
  int64_t integer = 0;
  if (spec.type == KeyType::kInt)
    return is_integer_scalar(node, &integer) && in_range(spec, static_cast<double>(integer)) ? "" : expected;
  try {
    return in_range(spec, node.as<double>()) ? "" : expected;
  } catch (const YAML::Exception&) {
    return expected;
  }
}

std::string check_text(const KeySpec& spec, const YAML::Node& node, const std::string& expected) {
  if (!node.IsScalar() && !node.IsNull()) return expected;
  const std::string value = node.IsNull() ? "" : node.as<std::string>();
  if (has_control_characters(value)) return kNoControlCharacters;
  const bool allowed =
      spec.choices.empty() || std::find(spec.choices.begin(), spec.choices.end(), value) != spec.choices.end();
  return allowed ? "" : expected;
}

std::string check_list(const KeySpec& spec, const YAML::Node& node, const std::string& expected) {
  const bool ints = spec.type == KeyType::kIntList;
  if (!node.IsSequence()) return expected + (ints ? ", e.g. [1, 2]" : ", e.g. [a, b]");
  for (const auto& item : node) {
    int64_t v = 0;
    if (!item.IsScalar()) return expected;
    if (ints && (!is_integer_scalar(item, &v) || static_cast<double>(v) < spec.min)) return expected;
    if (!ints && has_control_characters(item.Scalar())) return kNoControlCharacters;
  }
  return "";
}

// Checks one value against its key's type and bounds; returns "" when fine, else what is wrong.
std::string check_value(const KeySpec& spec, const YAML::Node& node) {
  const std::string expected = "expected " + describe_allowed(spec);
  switch (spec.type) {
    case KeyType::kInt:
    case KeyType::kFloat: return check_number(spec, node, expected);
    case KeyType::kBool:
      try {
        if (node.IsScalar()) node.as<bool>();
        return node.IsScalar() ? "" : expected;
      } catch (const YAML::Exception&) {
        return "expected true or false";
      }
    case KeyType::kString: return check_text(spec, node, expected);
    case KeyType::kIntList:
    case KeyType::kStringList: return check_list(spec, node, expected);
  }
  return expected;
}

std::string where_in(const std::string& source, const YAML::Node& node) {
  return source + ":" + std::to_string(node.Mark().line + 1);
}

// A spec lists a few dozen keys; past this many problems the rest are counted, not described (a huge file of
// unknown keys would otherwise spend seconds per thousand keys looking for suggestions).
constexpr size_t kProblemsDescribed = 20;
constexpr uintmax_t kMaxSpecBytes = 1 << 20;

// Walks nested maps down to schema leaves, recording "file:line" origins.
void flatten(const YAML::Node& map, const std::string& prefix, const std::string& source, Spec& spec,
             std::vector<std::string>& problems) {
  std::map<std::string, int> seen;  // name -> line, to refuse a key given twice (YAML would keep the last)
  for (const auto& entry : map) {
    const std::string where = where_in(source, entry.first);
    if (!entry.first.IsScalar()) {
      problems.push_back(where + ": a key must be a plain name, not a " +
                         (entry.first.IsMap()        ? "mapping"
                          : entry.first.IsSequence() ? "list"
                                                     : "null"));
      continue;
    }
    const std::string name = entry.first.as<std::string>();
    const std::string key = prefix.empty() ? name : prefix + "." + name;
    const YAML::Node& value = entry.second;
    const int line = entry.first.Mark().line + 1;
    if (auto [earlier, first] = seen.emplace(name, line); !first) {
      problems.push_back(where + ": '" + echo(key) + "' is given twice (lines " + std::to_string(earlier->second) +
                         " and " + std::to_string(line) + "); keep one");
      continue;
    }
    if (const KeySpec* key_spec = find_key(key)) {
      std::string problem = check_value(*key_spec, value);
      if (!problem.empty())
        problems.push_back(where + ": " + key + " = " + echo(yaml_inline(value)) + ": " + problem);
      else
        spec.set(key, value, where);
    } else if (is_section(key)) {
      if (value.IsMap())
        flatten(value, key, source, spec, problems);
      else if (!value.IsNull())
        problems.push_back(where + ": '" + key + "' is a section; expected a mapping of keys");
    } else {  // past kProblemsDescribed only counted: finding a suggestion costs a scan of the table
      problems.push_back(problems.size() < kProblemsDescribed ? unknown_key_message(where, key) : "");
    }
  }
}

// Hydra's override grammar: key=value sets, +key=value adds a key the spec does not set yet, ++key=value adds or
// sets, ~key (or ~key=value, naming the value it removes) deletes the spec's setting so the default applies.
void apply_override(const std::string& text, Spec& spec, std::vector<std::string>& problems) {
  const bool remove = text.rfind('~', 0) == 0;
  const bool add_or_set = text.rfind("++", 0) == 0;
  const bool add = !add_or_set && text.rfind('+', 0) == 0;
  const std::string body = text.substr(remove || add ? 1 : add_or_set ? 2 : 0);
  const auto equals = body.find('=');
  const std::string where = "override '" + echo(text) + "'";
  if (body.empty() || equals == 0 || (equals == std::string::npos && !remove)) {
    problems.push_back(where +
                       ": expected key=value (+key=value adds, ++key=value adds or sets, ~key deletes), "
                       "e.g. optimizer.lr=3e-4");
    return;
  }
  const std::string key = body.substr(0, equals);
  const KeySpec* key_spec = find_key(key);
  if (!key_spec) {
    problems.push_back(unknown_key_message(where, key));
    return;
  }
  YAML::Node value;
  if (equals != std::string::npos) {
    try {
      value = parse_yaml(body.substr(equals + 1), "the value");
    } catch (const UsageError& e) {
      problems.push_back(where + ": " + e.what());
      return;
    }
  }
  if (remove) {
    if (!spec.has(key))
      problems.push_back(where + ": " + key + " is not set in the spec; nothing to delete");
    else if (equals != std::string::npos && spec.value_text(key) != redact_credentials(yaml_inline(value)))
      problems.push_back(where + ": " + key + " is " + echo(spec.value_text(key)) + " (" + spec.origin(key) +
                         "), not " + echo(yaml_inline(value)));
    else
      spec.erase(key);
    return;
  }
  if (add && spec.has(key)) {
    problems.push_back(where + ": " + key + " is already set (" + spec.origin(key) + "); use ++" + key + "=" +
                       echo(body.substr(equals + 1)) + " to override it");
    return;
  }
  std::string problem = check_value(*key_spec, value);
  if (!problem.empty())
    problems.push_back(where + ": " + key + " = " + echo(yaml_inline(value)) + ": " + problem);
  else
    spec.set(key, value, "override");
}

}  // namespace

void throw_if_errors(const std::string& what, const std::vector<std::string>& problems) {
  if (problems.empty()) return;
  std::ostringstream message;
  message << what << ": " << problems.size() << (problems.size() == 1 ? " error" : " errors");
  size_t shown = 0;
  for (const auto& p : problems)
    if (!p.empty() && shown < kProblemsDescribed) message << "\n  " << p, ++shown;
  if (shown < problems.size()) message << "\n  ... and " << problems.size() - shown << " more";
  throw UsageError(message.str());
}

Spec parse_spec(const std::string& yaml_text, const std::string& source_name,
                const std::vector<std::string>& overrides) {
  Spec spec(source_name);
  std::vector<std::string> problems;
  const YAML::Node root = parse_yaml(yaml_text, source_name);
  if (root.IsMap())
    flatten(root, "", source_name, spec, problems);
  else if (!root.IsNull())
    problems.push_back(source_name + ":1: expected a mapping of sections (experiment:, model:, ...)");
  for (const auto& text : overrides) apply_override(text, spec, problems);
  throw_if_errors(source_name, problems);
  // The defaults parsed once: each spec gets its own copy of the nodes it lacks.
  static const std::vector<YAML::Node> defaults = [] {
    std::vector<YAML::Node> nodes;
    for (const auto& key_spec : schema()) nodes.push_back(YAML::Load(key_spec.default_yaml));
    return nodes;
  }();
  for (size_t i = 0; i < schema().size(); ++i)
    if (!spec.has(schema()[i].key)) spec.set(schema()[i].key, YAML::Clone(defaults[i]), "default");
  return spec;
}

Spec load_spec(const std::string& path, const std::vector<std::string>& overrides) {
  std::error_code error;
  if (!std::filesystem::exists(path, error)) throw UsageError(path + ": cannot open the spec file (does it exist?)");
  require_regular_file(path, "a spec file (SPEC.yaml)");
  const auto size = std::filesystem::file_size(path, error);
  if (!error && size > kMaxSpecBytes)
    throw UsageError(path + ": " + std::to_string(size) + " bytes; a spec is a few kilobytes (at most " +
                     std::to_string(kMaxSpecBytes) + " bytes)");
  std::ifstream in(path, std::ios::binary);
  if (!in) throw UsageError(path + ": cannot open the spec file (does it exist?)");
  std::stringstream text;
  text << in.rdbuf();
  return parse_spec(text.str(), path, overrides);
}

}  // namespace mpt::config
