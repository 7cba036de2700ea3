// Model names -> builders. A spec's model section picks one; the registry knows each family's options.
#pragma once

#include <string>

#include "core/data/dataset.h"
#include "core/precision/policy.h"
#include "models/bert.h"
#include "models/mlp.h"
#include "models/model.h"
#include "models/resnet.h"

namespace mpt::models {

struct ModelConfig {
  std::string name = "mlp";  // mlp | resnet18..resnet152 | bert-tiny..bert-large
  MlpConfig mlp;
  ResNetConfig resnet;  // depth, in_channels and num_classes are filled in by build_model
  std::string bert_head = "mlm";  // mlm | classification
  double bert_dropout = 0.1;
  std::string init_from;  // weights file to start from ("" = fresh initialisation)
};

// The model `config` names, shaped for the data's samples (input features, channels, vocabulary, classes).
Model build_model(ModelConfig config, const data::SampleShape& sample, const precision::ModulePolicy& policy);

}  // namespace mpt::models
