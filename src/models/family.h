// A model family as one descriptor: the names it answers to, the spec keys it alone reads (bound to its own config
// struct, common/keys.h), what its inputs are, the blocks it can recompute, and how it is built and checked. The
// registry lists the families; the key table, the relevance rules and model.name's choices are assembled from them
// (run/plugins.cpp), so a new family is its model file and this descriptor, and a line in the registry.
#pragma once

#include <nlohmann/json.hpp>

#include <functional>
#include <map>
#include <string>
#include <vector>

#include "common/keys.h"
#include "data/dataset.h"
#include "models/model.h"
#include "models/recompute.h"
#include "precision/policy.h"

namespace mpt::models {

// model.hf_config's meaning, the same in every family that builds its architecture from a Hugging Face config.json
// (a key two plug-ins declare must read alike).
inline constexpr const char* kHfConfigDoc =
    "BERT and Llama: a Hugging Face config.json (or its folder) whose architecture model.name: bert or llama builds, "
    "e.g. data/all-MiniLM-L6-v2 (scripts/setup.sh links the packaged all-MiniLM-L6-v2 there).";

// The spec's model section: what every family shares, and the values of the chosen family's own keys.
struct ModelConfig {
  std::string name = "mlp";            // a preset of one family
  double dropout = 0.0;                // the families that take model.dropout
  std::string init_from;               // weights file to start from ("" = fresh initialisation)
  std::vector<std::string> init_skip;  // globs over tensor names that keep their initialisation
  keys::Options options;               // model.hidden_sizes, model.small_input, ...: the family's own keys
};

// A problem with the model section found before any work, under the key it concerns.
struct ModelProblem {
  std::string key;
  std::string message;
};

// The model `config` names, shaped for the data's samples (input features, channels, vocabulary, classes);
// `memory` says which blocks recompute their activations in backward.
using ModelBuilder = std::function<Model(const ModelConfig&, const MemoryConfig&, const data::SampleShape&,
                                         const precision::ModulePolicy&)>;

// A trained model's weights by name, as their shapes: what an export reads the vocabulary and the classes from.
using WeightShapes = std::map<std::string, std::vector<int64_t>>;
// The Hugging Face config.json that rebuilds the model `config` names with these weights; an mpt::Error naming the
// tensor it needs when the weights lack it.
using HfConfigWriter = std::function<nlohmann::ordered_json(const ModelConfig&, const WeightShapes&)>;

struct ModelFamily {
  std::string prefix;                // "mlp", "resnet", "bert", "vit"
  std::string title;                 // as messages name it: "MLP", "ResNet", "BERT", "ViT"
  data::Modality modality;           // what its inputs are
  std::vector<std::string> presets;  // the model.name values it takes
  std::vector<keys::KeySpec> keys;   // the model.* keys it alone reads
  bool takes_dropout = false;        // model.dropout applies
  // Its output layers and norms: a default precision.fp32_modules gains those it does not already hold.
  std::vector<std::string> fp32_modules;
  std::vector<Recompute> recomputes = {Recompute::kNone};  // the memory.activation_checkpointing modes it has
  ModelBuilder build;
  std::function<std::vector<ModelProblem>(const ModelConfig&)> check;  // null: nothing to check
  // Hugging Face's base_model_prefix: the head models' names put it before the base model's ("bert.embeddings...."),
  // so a file of the base model alone loads into them. Empty: names load as they are.
  std::string hf_base_prefix;
  HfConfigWriter hf_config;  // null: `mpt export --format hf` does not take the family
};

}  // namespace mpt::models
