// Which keys say something for a given spec: the keys of another model family, dataset, optimizer, schedule or
// precision mode do not, nor debug and tracking keys left at their defaults. The run's spec table leaves those
// out (config.yaml and `mpt train --all-keys` keep them all).
#pragma once

#include <string>
#include <vector>

namespace mpt::config {

class Spec;

// Whether `key` applies to `spec`; a key set in the file or an override always does.
bool applies(const std::string& key, const Spec& spec);

// A key set to other than its default that does nothing under the spec's other keys: `deciding_key` is
// `deciding_value`, and `key` applies only when it is one of `applies_under` (a '*' ends a prefix).
struct InertKey {
  std::string key, deciding_key, deciding_value, applies_under;
};
// Every such key of `spec` (resolved: "mixed" is bf16 or fp16 by then), in key-table order.
std::vector<InertKey> inert_keys(const Spec& spec);

}  // namespace mpt::config
