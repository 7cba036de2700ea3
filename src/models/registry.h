// Model names -> builders. A spec's model section picks one; the registry knows each family's options.
#pragma once

#include <functional>
#include <string>
#include <vector>

#include "data/dataset.h"
#include "models/bert.h"
#include "models/mlp.h"
#include "models/model.h"
#include "models/recompute.h"
#include "models/resnet.h"
#include "precision/policy.h"

namespace mpt::models {

struct ModelConfig {
  std::string name = "mlp";  // mlp | resnet18..resnet152 | bert-tiny..bert-large | bert (from hf_config)
  MlpConfig mlp;
  ResNetConfig resnet;            // depth, in_channels and num_classes are filled in by build_model
  std::string bert_head = "mlm";  // mlm | classification
  double dropout = 0.0;    // MLP: after each hidden layer; BERT: hidden states and attention (BERT trains with 0.1)
  int64_t bert_heads = 0;  // a preset's attention heads; 0 = hidden / 64
  std::string hf_config;   // model "bert": the architecture of this Hugging Face config.json
  std::string init_from;   // weights file to start from ("" = fresh initialisation)
  std::vector<std::string> init_skip;  // globs over tensor names that keep their initialisation
};

// A problem with the model section found before any work, under the key it concerns.
struct ModelProblem {
  std::string key;
  std::string message;
};

// A family of models: the names it answers to, what its samples are, how it is built and what it checks first.
using ModelBuilder = std::function<Model(const ModelConfig&, const MemoryConfig&, const data::SampleShape&,
                                         const precision::ModulePolicy&)>;

struct ModelFamily {
  std::string prefix;                // "mlp", "resnet", "bert"
  data::Modality modality;           // what its inputs are
  std::vector<std::string> presets;  // the model.name values it takes
  ModelBuilder build;
  std::function<std::vector<ModelProblem>(const ModelConfig&)> check;  // null: nothing to check
  std::vector<Recompute> recomputes;  // the memory.activation_checkpointing modes it has blocks for
};

const std::vector<ModelFamily>& model_families();
// The family `name` belongs to; a UsageError for an unknown name.
const ModelFamily& model_family(const std::string& name);
// Why data of the other modality does not fit `family`.
std::string modality_mismatch(const ModelFamily& family);

// The model `config` names, shaped for the data's samples (input features, channels, vocabulary, classes).
// `memory` says which blocks recompute their activations in backward.
Model build_model(ModelConfig config, const data::SampleShape& sample, const precision::ModulePolicy& policy,
                  const MemoryConfig& memory = {});

// The BERT architecture `config` names (a preset with its head count, or a config.json), with the spec's
// dropout and head; vocabulary and classes are the data's, filled in by build_model.
BertConfig bert_architecture(const ModelConfig& config);

}  // namespace mpt::models
