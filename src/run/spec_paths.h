// Relative paths in a spec (the keys marked as paths: data.root, data.vocab, model.init_from, ...) are taken from
// the working directory; when nothing is there, from the spec file's folder or the nearest folder above it that
// holds the path, so the shipped configs/*.yaml find the clone's data/ from any directory. experiment.output_root stays
// relative to the working directory: outputs go where the command runs.
#pragma once

#include <map>
#include <string>

#include "config/spec.h"

namespace mpt::run {

// Rewrites each relative path found away from the working directory to that place (its origin says where it
// was found). Returns, for each relative path found nowhere, the places looked, for the error message.
std::map<std::string, std::string> resolve_relative_paths(config::Spec& spec);

}  // namespace mpt::run
