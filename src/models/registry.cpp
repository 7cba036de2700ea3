// The model families (see registry.h): one line each.
#include "models/registry.h"

#include "common/error.h"
#include "data/datasets.h"
#include "models/bert.h"
#include "models/llama.h"
#include "models/mlp.h"
#include "models/resnet.h"
#include "models/vit.h"

namespace mpt::models {

const std::vector<ModelFamily>& model_families() {
  static const std::vector<ModelFamily> families = {mlp_family(), resnet_family(), bert_family(), vit_family(),
                                                    llama_family()};
  return families;
}

const ModelFamily& model_family(const std::string& name) {
  for (const ModelFamily& family : model_families())
    for (const std::string& preset : family.presets)
      if (preset == name) return family;
  throw UsageError("model.name: unknown model '" + name + "'");
}

Model build_model(const ModelConfig& config, const data::SampleShape& sample, const precision::ModulePolicy& policy,
                  const MemoryConfig& memory) {
  const ModelFamily& family = model_family(config.name);
  const data::Modality modality = sample.seq_len > 0 ? data::Modality::kTokens : data::Modality::kImages;
  if (modality != family.modality) throw UsageError("model.name: " + config.name + ": " + modality_mismatch(family));
  return family.build(config, memory, sample, policy);
}

std::string modality_mismatch(const ModelFamily& family) {
  std::string datasets;
  for (const data::DatasetKind& kind : data::dataset_kinds())
    if (kind.modality == family.modality) datasets += (datasets.empty() ? "" : " or ") + kind.name;
  return family.title + (family.modality == data::Modality::kTokens ? " reads token sequences" : " reads images") +
         "; expected data.name: " + datasets;
}

}  // namespace mpt::models
