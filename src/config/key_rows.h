// How a spec key's row is written where the key is declared: integer("train.epochs", "10", 0, kInf, "doc") and
// the like. The defaults are YAML text, as `mpt keys` and docs/spec.md show them.
#pragma once

#include <limits>
#include <string>
#include <vector>

#include "common/keys.h"

namespace mpt::config::rows {

using keys::KeySpec;
using keys::KeyType;

constexpr double kInf = std::numeric_limits<double>::infinity();
// Loss scales are FP32 values (GradScaler's scale is an FP32 tensor): beyond this they are Inf.
constexpr double kFp32Max = std::numeric_limits<float>::max();

KeySpec integer(std::string key, std::string def, double min, double max, std::string doc);
KeySpec real(std::string key, std::string def, double min, double max, std::string doc, bool min_exclusive = false,
             bool max_exclusive = false);
KeySpec boolean(std::string key, std::string def, std::string doc);
KeySpec text(std::string key, std::string def, std::string doc);
KeySpec choice(std::string key, std::string def, std::vector<std::string> choices, std::string doc);
KeySpec list(std::string key, KeyType type, std::string def, double min, std::string doc);
// A key whose value may change when a run resumes (cadences, budgets, rehearsals): everything else must match
// the run directory's config.yaml.
KeySpec resumable(KeySpec spec);

}  // namespace mpt::config::rows
