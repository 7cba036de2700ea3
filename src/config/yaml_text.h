// YAML text from a user's file, read with bounds: what it nests and what its aliases expand to are measured on
// the parser's events, once per node as written, before any node tree is built or walked.
#pragma once

#include <yaml-cpp/yaml.h>

#include <cstdint>
#include <string>

namespace mpt::config {

// Deeper than any spec or suite nests; more nodes than any holds, counting each alias as the node it names.
inline constexpr int kMaxYamlDepth = 32;
inline constexpr uint64_t kMaxYamlNodes = 100000;

// The document's root. A UsageError naming `source` and the line (and column) when the text is not YAML, nests
// more than kMaxYamlDepth levels, expands to more than kMaxYamlNodes nodes through its aliases, or holds an
// alias to a node that contains it.
YAML::Node parse_yaml(const std::string& text, const std::string& source);

}  // namespace mpt::config
