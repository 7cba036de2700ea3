// The model families a spec's model.name picks from (each a descriptor, models/family.h).
#pragma once

#include <string>
#include <vector>

#include "data/dataset.h"
#include "models/family.h"
#include "models/model.h"
#include "models/recompute.h"
#include "precision/policy.h"

namespace mpt::models {

const std::vector<ModelFamily>& model_families();
// The family `name` belongs to; a UsageError for an unknown name.
const ModelFamily& model_family(const std::string& name);
// Why data of the other modality does not fit `family`.
std::string modality_mismatch(const ModelFamily& family);

// The model `config` names, shaped for the data's samples (input features, channels, vocabulary, classes).
// `memory` says which blocks recompute their activations in backward.
Model build_model(const ModelConfig& config, const data::SampleShape& sample, const precision::ModulePolicy& policy,
                  const MemoryConfig& memory = {});

}  // namespace mpt::models
