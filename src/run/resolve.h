// Resolution and cross-key validation of a loaded spec, before any training work: "auto" and "mixed" become
// concrete choices for this machine, and every inconsistency or missing file is reported at once (exit 2).
#pragma once

#include <string>
#include <vector>

#include "config/spec.h"
#include "hardware/hardware.h"

namespace mpt::run {

// Resolves device.type, distributed.backend, precision.mode, precision.strategy, precision.loss_scale.mode and
// experiment.name in place (each recorded with its reason), and checks what single-key validation cannot: the data's
// and the model's files, the train length, precision/device and model/data combinations.
void resolve_spec(config::Spec& spec, const hardware::Facts& facts);

// config::load_spec then resolve_spec for this machine: what every command that runs or inspects a spec starts with.
config::Spec load_resolved_spec(const std::string& path, const std::vector<std::string>& overrides);

}  // namespace mpt::run
