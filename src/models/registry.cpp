// The model registry.
#include "models/registry.h"

#include "common/error.h"
#include "models/hf_config.h"

namespace mpt::models {

BertConfig bert_architecture(const ModelConfig& config) {
  if (config.name == "bert" && config.hf_config.empty())
    throw UsageError("model.name: bert takes its architecture from model.hf_config (a Hugging Face config.json); "
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

Model build_model(ModelConfig config, const data::SampleShape& sample, const precision::ModulePolicy& policy) {
  const bool text = sample.seq_len > 0;
  const bool bert = config.name.rfind("bert", 0) == 0;
  if (text != bert)
    throw UsageError("model.name: " + config.name + (bert ? " reads token sequences; set data.name: text_corpus or text_classification"
                                                          : " reads images; use a bert-* model for text data"));
  if (config.name == "mlp") {
    config.mlp.dropout = config.dropout;
    config.mlp.in_features = sample.features();
    config.mlp.num_classes = sample.num_classes;
    return std::make_shared<MlpImpl>(config.mlp, policy);
  }
  if (config.name.rfind("resnet", 0) == 0) {
    config.resnet.depth = std::stoi(config.name.substr(6));
    config.resnet.in_channels = sample.channels;
    config.resnet.num_classes = sample.num_classes;
    return std::make_shared<ResNetImpl>(config.resnet, policy);
  }
  if (bert) {
    BertConfig bert_config = bert_architecture(config);
    if (config.name == "bert" && bert_config.vocab_size != sample.vocab_size)
      throw UsageError(config.hf_config + ": vocab_size " + std::to_string(bert_config.vocab_size) +
                       " differs from data.vocab's " + std::to_string(sample.vocab_size) + " tokens");
    bert_config.vocab_size = sample.vocab_size;
    if (sample.seq_len > bert_config.max_positions)
      throw UsageError("data.seq_len = " + std::to_string(sample.seq_len) + " exceeds BERT's " +
                       std::to_string(bert_config.max_positions) + " positions");
    if (config.bert_head == "mlm") {
      if (sample.num_classes > 0)
        throw UsageError("model.head: mlm pre-trains on unlabelled text (text_corpus), but the data has labels; use "
                         "model.head: classification");
      return std::make_shared<BertForMaskedLmImpl>(bert_config, policy);
    }
    if (sample.num_classes == 0)
      throw UsageError("model.head: classification needs labelled data (data.name: text_classification)");
    bert_config.num_classes = sample.num_classes;
    return std::make_shared<BertForSequenceClassificationImpl>(bert_config, policy);
  }
  throw UsageError("model.name: unknown model '" + config.name + "'");
}

}  // namespace mpt::models
