// The model families (see registry.h).
#include "models/registry.h"

#include "common/error.h"
#include "common/files.h"
#include "models/hf_config.h"

namespace mpt::models {
namespace {

Model build_mlp(ModelConfig config, const MemoryConfig&, const data::SampleShape& sample,
                const precision::ModulePolicy& policy) {
  config.mlp.dropout = config.dropout;
  config.mlp.in_features = sample.features();
  config.mlp.num_classes = sample.num_classes;
  return std::make_shared<MlpImpl>(config.mlp, policy);
}

Model build_resnet(ModelConfig config, const MemoryConfig& memory, const data::SampleShape& sample,
                   const precision::ModulePolicy& policy) {
  config.resnet.depth = std::stoi(config.name.substr(6));  // "resnet50"
  config.resnet.in_channels = sample.channels;
  config.resnet.num_classes = sample.num_classes;
  return std::make_shared<ResNetImpl>(config.resnet, policy, memory.activation_checkpointing);
}

Model build_bert(const ModelConfig& config, const MemoryConfig& memory, const data::SampleShape& sample,
                 const precision::ModulePolicy& policy) {
  BertConfig bert = bert_architecture(config);
  if (config.name == "bert" && bert.vocab_size != sample.vocab_size)
    throw UsageError(config.hf_config + ": vocab_size " + std::to_string(bert.vocab_size) +
                     " differs from data.vocab's " + std::to_string(sample.vocab_size) + " tokens");
  bert.vocab_size = sample.vocab_size;
  bert.recompute = memory.activation_checkpointing;
  if (sample.seq_len > bert.max_positions)
    throw UsageError("data.seq_len = " + std::to_string(sample.seq_len) + " exceeds BERT's " +
                     std::to_string(bert.max_positions) + " positions");
  if (config.bert_head == "mlm") {
    if (sample.num_classes > 0)
      throw UsageError(
          "model.head: mlm pre-trains on unlabelled text (text_corpus), but the data has labels; use "
          "model.head: classification");
    return std::make_shared<BertForMaskedLmImpl>(bert, policy);
  }
  if (sample.num_classes == 0)
    throw UsageError("model.head: classification needs labelled data (data.name: text_classification)");
  bert.num_classes = sample.num_classes;
  return std::make_shared<BertForSequenceClassificationImpl>(bert, policy);
}

std::vector<ModelProblem> bert_problems(const ModelConfig& config) {
  std::vector<ModelProblem> problems;
  if (!config.hf_config.empty())
    if (const std::string why = path_problem(config.hf_config, PathKind::kAny); !why.empty())
      problems.push_back({"model.hf_config", config.hf_config + ": " + why});
  if (config.name == "bert" && config.hf_config.empty())
    problems.push_back({"model.name",
                        "bert: takes its architecture from model.hf_config (a Hugging Face config.json); "
                        "set it, or name a preset (bert-tiny|mini|small|medium|base|large)"});
  return problems;
}

const std::vector<ModelFamily>& families() {
  static const std::vector<ModelFamily> table = {
      {"mlp", data::Modality::kImages, {"mlp"}, build_mlp, nullptr, {Recompute::kNone}},
      {"resnet",
       data::Modality::kImages,
       {"resnet18", "resnet34", "resnet50", "resnet101", "resnet152"},
       build_resnet,
       nullptr,
       {Recompute::kNone, Recompute::kFull}},
      {"bert",
       data::Modality::kTokens,
       {"bert-tiny", "bert-mini", "bert-small", "bert-medium", "bert-base", "bert-large", "bert"},
       build_bert,
       bert_problems,
       {Recompute::kNone, Recompute::kFull, Recompute::kSelective}},
  };
  return table;
}

}  // namespace

const std::vector<ModelFamily>& model_families() { return families(); }

const ModelFamily& model_family(const std::string& name) {
  for (const ModelFamily& family : families())
    for (const std::string& preset : family.presets)
      if (preset == name) return family;
  throw UsageError("model.name: unknown model '" + name + "'");
}

BertConfig bert_architecture(const ModelConfig& config) {
  if (config.name == "bert" && config.hf_config.empty())
    throw UsageError(
        "model.name: bert takes its architecture from model.hf_config (a Hugging Face config.json); "
        "set it, or name a preset (bert-tiny|mini|small|medium|base|large)");
  BertConfig bert = config.name == "bert" ? read_hf_bert_config(config.hf_config) : bert_preset(config.name);
  if (config.name != "bert" && config.bert_heads > 0) {
    if (bert.hidden % config.bert_heads != 0)
      throw UsageError("model.heads = " + std::to_string(config.bert_heads) + ": " + config.name + "'s hidden size " +
                       std::to_string(bert.hidden) + " is not a multiple of it");
    bert.heads = config.bert_heads;
  }
  bert.dropout = config.dropout;
  bert.head = config.bert_head;
  return bert;
}

Model build_model(ModelConfig config, const data::SampleShape& sample, const precision::ModulePolicy& policy,
                  const MemoryConfig& memory) {
  const ModelFamily& family = model_family(config.name);
  const data::Modality modality = sample.seq_len > 0 ? data::Modality::kTokens : data::Modality::kImages;
  if (modality != family.modality) throw UsageError("model.name: " + config.name + ": " + modality_mismatch(family));
  return family.build(config, memory, sample, policy);
}

std::string modality_mismatch(const ModelFamily& family) {
  return family.modality == data::Modality::kTokens
             ? "BERT reads token sequences; expected data.name: text_corpus or text_classification"
             : "reads images; expected an image dataset (text needs a bert-* model)";
}

}  // namespace mpt::models
