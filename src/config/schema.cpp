// The spec key table, assembled from the stack's keys and the plug-ins' (README/docs are generated from it).
#include "config/schema.h"

#include <algorithm>

#include "common/error.h"

namespace mpt::config {
namespace {

std::vector<KeySpec>& stack_rows() {
  static std::vector<KeySpec> rows;
  return rows;
}

std::vector<keys::KeyGroup>& groups() {
  static std::vector<keys::KeyGroup> added;
  return added;
}

bool& table_read() {
  static bool read = false;
  return read;
}

// The plug-ins' keys in their sections (each after the last key of its section) and their names in the deciding
// key's choices.
std::vector<KeySpec> assemble() {
  if (stack_rows().empty()) throw Error("the key table was read before the stack's keys joined it (run/plugins.h)");
  std::vector<KeySpec> table = stack_rows();
  auto row = [&table](const std::string& key) {
    return std::find_if(table.begin(), table.end(), [&](const KeySpec& spec) { return spec.key == key; });
  };
  for (const auto& group : groups()) {
    if (!group.deciding_key.empty()) {
      auto deciding = row(group.deciding_key);
      if (deciding == table.end()) throw Error("a plug-in names " + group.deciding_key + ", which is no spec key");
      for (const auto& name : group.names) deciding->choices.push_back(name);
    }
    for (const auto& key : group.keys) {
      if (row(key.key) != table.end()) continue;  // another plug-in of the kind declares it too (add_plugin_keys)
      const std::string section = key.key.substr(0, key.key.find('.') + 1);
      auto last = std::find_if(table.rbegin(), table.rend(),
                               [&](const KeySpec& spec) { return spec.key.rfind(section, 0) == 0; });
      table.insert(last == table.rend() ? table.end() : last.base(), key);  // a section of plug-ins only: last
    }
  }
  return table;
}

bool same_row(const KeySpec& a, const KeySpec& b) {
  return a.type == b.type && a.default_yaml == b.default_yaml && a.choices == b.choices && a.min == b.min &&
         a.max == b.max && a.doc == b.doc;
}

}  // namespace

void set_stack_keys(std::vector<KeySpec> rows) {
  if (table_read()) throw Error("the stack's keys joined the key table after it was read");
  stack_rows() = std::move(rows);
}

void add_plugin_keys(const keys::KeyGroup& group) {
  if (table_read()) throw Error("a plug-in added its keys after the key table was read");
  for (const auto& key : group.keys)
    for (const auto& earlier : groups())
      for (const auto& other : earlier.keys)
        if (other.key == key.key && !same_row(other, key))
          throw Error("two plug-ins declare the spec key " + key.key + " differently");
  groups().push_back(group);
}

const std::vector<keys::KeyGroup>& plugin_key_groups() { return groups(); }

const std::vector<KeySpec>& schema() {
  table_read() = true;
  static const std::vector<KeySpec> table = assemble();
  return table;
}

const KeySpec* find_key(const std::string& key) {
  for (const auto& spec : schema())
    if (spec.key == key) return &spec;
  return nullptr;
}

bool may_differ_on_resume(const std::string& key) {
  const KeySpec* spec = find_key(key);
  return spec && spec->resumable;
}

}  // namespace mpt::config
