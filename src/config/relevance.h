// Which keys say something for a given spec: the keys of another model family, dataset, optimizer, schedule or
// precision mode do not, nor debug and tracking keys left at their defaults. The run's spec table leaves those
// out (config.yaml and `mpt train --all-keys` keep them all).
#pragma once

#include <string>

namespace mpt::config {

class Spec;

// Whether `key` applies to `spec`; a key set in the file or an override always does.
bool applies(const std::string& key, const Spec& spec);

}  // namespace mpt::config
