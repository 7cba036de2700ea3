// Model names -> builders. A spec's model section picks one; the registry knows each family's options.
#pragma once

#include <string>

#include "core/precision/policy.h"
#include "models/mlp.h"
#include "models/model.h"

namespace mpt::models {

struct ModelConfig {
  std::string name = "mlp";
  MlpConfig mlp;
};

// Shapes a model needs from the data: set by the command wiring from the dataset it loaded.
struct DataShape {
  int64_t in_features = 0;
  int64_t num_classes = 0;
};

Model build_model(ModelConfig config, const DataShape& shape, const precision::ModulePolicy& policy);

}  // namespace mpt::models
