// Loading a spec: YAML file + Hydra-style key=value overrides -> a Spec with every key typed and in range.
// Every problem is collected and reported at once in one UsageError (exit 2), one line per problem.
#pragma once

#include <string>
#include <vector>

#include "config/spec.h"
#include "config/yaml_text.h"

namespace mpt::config {

// Reads SPEC.yaml and applies overrides ("optimizer.lr=3e-4", "train.epochs=1").
Spec load_spec(const std::string& path, const std::vector<std::string>& overrides);

// Same as load_spec for YAML text already in memory; `source_name` stands in for the file name in errors.
Spec parse_spec(const std::string& yaml_text, const std::string& source_name,
                const std::vector<std::string>& overrides);

// Throws one UsageError listing every problem, if there is any.
void throw_if_errors(const std::string& what, const std::vector<std::string>& problems);

}  // namespace mpt::config
