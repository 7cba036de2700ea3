// The model registry.
#include "models/registry.h"

#include "core/common/error.h"

namespace mpt::models {

Model build_model(ModelConfig config, const DataShape& shape, const precision::ModulePolicy& policy) {
  if (config.name == "mlp") {
    config.mlp.in_features = shape.in_features;
    config.mlp.num_classes = shape.num_classes;
    return std::make_shared<MlpImpl>(config.mlp, policy);
  }
  if (config.name.rfind("resnet", 0) == 0) {
    config.resnet.depth = std::stoi(config.name.substr(6));
    config.resnet.in_channels = shape.channels;
    config.resnet.num_classes = shape.num_classes;
    return std::make_shared<ResNetImpl>(config.resnet, policy);
  }
  throw UsageError("model.name: unknown model '" + config.name + "'");
}

}  // namespace mpt::models
