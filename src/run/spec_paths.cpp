#include "run/spec_paths.h"

#include <yaml-cpp/yaml.h>

#include <filesystem>

#include "config/relevance.h"
#include "config/schema.h"

namespace mpt::run {
namespace {

namespace fs = std::filesystem;

bool is_there(const fs::path& path) {
  std::error_code error;
  return fs::exists(path, error);
}

}  // namespace

std::map<std::string, std::string> resolve_relative_paths(config::Spec& spec) {
  std::map<std::string, std::string> looked;
  std::error_code error;
  const fs::path here = fs::current_path(error);
  const fs::path spec_folder = fs::absolute(spec.source_path(), error).parent_path();
  for (const auto& row : config::schema()) {
    if (!row.is_path) continue;
    const std::string& key = row.key;
    const std::string value = spec.get_string(key);
    if (value.empty() || fs::path(value).is_absolute() || !config::applies(key, spec) || is_there(value)) continue;
    std::string places = "the working directory " + here.string();
    bool found = false;
    for (fs::path folder = spec_folder; !found && !folder.empty(); folder = folder.parent_path()) {
      const fs::path candidate = (folder / value).lexically_normal();
      if (is_there(candidate)) {
        spec.set(key, YAML::Node(candidate.string()),
                 spec.origin(key) + " (" + value + ", found under " + folder.string() + ")");
        found = true;
      }
      places += ", " + folder.string();
      if (folder == folder.parent_path()) break;
    }
    if (!found) looked[key] = places;
  }
  return looked;
}

}  // namespace mpt::run
