// The BERT family's descriptor (see bert.h): its keys, its architecture from a preset or a config.json, its checks.
#include "common/error.h"
#include "models/bert.h"
#include "models/hf_config.h"

namespace mpt::models {
namespace {

// The spec keys only BERT reads.
struct BertOptions {
  int64_t heads = 0;
  std::string hf_config;
  std::string head = "mlm";
};

const keys::OptionTable<BertOptions>& bert_options() {
  static const keys::OptionTable<BertOptions> table = [] {
    keys::OptionTable<BertOptions> options;
    options
        .add("model.heads", &BertOptions::heads,
             "BERT presets: attention heads; 0 = hidden size / 64 (Google's sizes).")
        .between(0, 1024);
    options.add("model.hf_config", &BertOptions::hf_config, kHfConfigDoc).path();
    options
        .add("model.head", &BertOptions::head,
             "BERT: masked-LM pre-training (decoder tied to the word embeddings) or sequence classification.")
        .one_of({"mlm", "classification"});
    return options;
  }();
  return table;
}

const char* const kNeedsHfConfig =
    "bert: takes its architecture from model.hf_config (a Hugging Face config.json); set it, or name a preset "
    "(bert-tiny|mini|small|medium|base|large)";

Model build_bert(const ModelConfig& config, const MemoryConfig& memory, const data::SampleShape& sample,
                 const precision::ModulePolicy& policy) {
  BertConfig bert = bert_architecture(config);
  if (config.name == "bert" && bert.vocab_size != sample.vocab_size)
    throw UsageError(bert_options().read(config.options).hf_config + ": vocab_size " + std::to_string(bert.vocab_size) +
                     " differs from data.vocab's " + std::to_string(sample.vocab_size) + " tokens");
  bert.vocab_size = sample.vocab_size;
  bert.recompute = memory.activation_checkpointing;
  if (sample.seq_len > bert.max_positions)
    throw UsageError("data.seq_len = " + std::to_string(sample.seq_len) + " exceeds BERT's " +
                     std::to_string(bert.max_positions) + " positions");
  if (sample.causal)
    throw UsageError("model.name: " + config.name +
                     " is an encoder; causal_lm's next-token targets are for a decoder (model.name: llama-tiny)");
  if (bert.head == "mlm") {
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
  return hf_config_problems(config, bert_options().read(config.options).hf_config, "bert", kNeedsHfConfig);
}

nlohmann::ordered_json export_config(const ModelConfig& config, const WeightShapes& weights) {
  BertConfig bert = bert_architecture(config);
  bert.vocab_size = weight_rows(weights, "bert.embeddings.word_embeddings.weight", "a BERT checkpoint of this head");
  if (bert.head == "classification")
    bert.num_classes = weight_rows(weights, "classifier.weight", "a BERT checkpoint of this head");
  return hf_bert_config(bert);
}

}  // namespace

BertConfig bert_architecture(const ModelConfig& config) {
  const BertOptions options = bert_options().read(config.options);
  if (config.name == "bert" && options.hf_config.empty())
    throw UsageError(std::string("model.name: ") + kNeedsHfConfig);
  BertConfig bert = config.name == "bert" ? read_hf_bert_config(options.hf_config) : bert_preset(config.name);
  if (config.name != "bert" && options.heads > 0) {
    if (bert.hidden % options.heads != 0)
      throw UsageError("model.heads = " + std::to_string(options.heads) + ": " + config.name + "'s hidden size " +
                       std::to_string(bert.hidden) + " is not a multiple of it");
    bert.heads = options.heads;
  }
  bert.dropout = config.dropout;
  bert.head = options.head;
  return bert;
}

const ModelFamily& bert_family() {
  static const ModelFamily family{
      "bert",
      "BERT",
      data::Modality::kTokens,
      {"bert-tiny", "bert-mini", "bert-small", "bert-medium", "bert-base", "bert-large", "bert"},
      bert_options().keys(),
      /*takes_dropout=*/true,
      /*fp32_modules=*/{"*LayerNorm", "cls.predictions", "classifier"},
      {Recompute::kNone, Recompute::kFull, Recompute::kSelective},
      build_bert,
      bert_problems,
      /*hf_base_prefix=*/"bert",
      export_config};
  return family;
}

}  // namespace mpt::models
