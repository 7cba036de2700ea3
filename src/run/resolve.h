// Resolution and cross-key validation of a loaded spec, before any training work: "auto" and "mixed" become
// concrete choices for this machine, and every inconsistency or missing file is reported at once (exit 2).
#pragma once

#include <string>
#include <vector>

#include "config/spec.h"

namespace mpt::run {

// What resolution needs to know about the machine (injectable so tests can ask "what if there is a GPU").
struct HardwareFacts {
  bool cuda_available = false;
  int cuda_capability = 0;  // major*10+minor
  bool cpu_native_bf16 = false;
};

HardwareFacts probe_hardware();

// What precision.mode "mixed" becomes on `device` ("cpu" or "cuda"): mixed_bf16 or mixed_fp16, and why.
struct MixedChoice {
  std::string mode;
  std::string reason;
};
MixedChoice choose_mixed(const std::string& device, const HardwareFacts& hardware);

// Resolves device.type, precision.mode, precision.loss_scale.mode and experiment.name in place, and checks
// what single-key validation cannot: data files, train length, precision/device combinations.
void resolve_spec(config::Spec& spec, const HardwareFacts& hardware);

// config::load_spec then resolve_spec for this machine: what every command that runs or inspects a spec starts with.
config::Spec load_resolved_spec(const std::string& path, const std::vector<std::string>& overrides);

}  // namespace mpt::run
