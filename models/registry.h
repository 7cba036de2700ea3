// Model names -> builders. A spec's model section picks one; the registry knows each family's options.
#pragma once

#include <string>

#include "core/data/dataset.h"
#include "core/precision/policy.h"
#include "models/mlp.h"
#include "models/resnet.h"
#include "models/model.h"

namespace mpt::models {

struct ModelConfig {
  std::string name = "mlp";  // mlp | resnet18 | resnet34 | resnet50 | resnet101 | resnet152
  MlpConfig mlp;
  ResNetConfig resnet;  // depth, in_channels and num_classes are filled in by build_model
};

// Shapes a model needs from the data: set by the command wiring from the dataset it loaded.
struct DataShape {
  int64_t channels = 0;
  int64_t in_features = 0;  // C x H x W
  int64_t num_classes = 0;
};

// The shape a model needs from a dataset's samples.
inline DataShape data_shape(const data::SampleShape& sample) {
  return {sample.channels, sample.channels * sample.height * sample.width, sample.num_classes};
}

Model build_model(ModelConfig config, const DataShape& shape, const precision::ModulePolicy& policy);

}  // namespace mpt::models
