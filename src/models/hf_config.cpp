// config.json <-> BertConfig (see hf_config.h). Keys and defaults follow transformers' BertConfig.
#include "models/hf_config.h"

#include <filesystem>
#include <fstream>

#include "common/error.h"
#include "common/files.h"
#include "common/json.h"

namespace mpt::models {
namespace {

nlohmann::json parse_file(const std::string& path) {
  if (!std::ifstream(path)) throw Error(path + ": cannot open (expected a Hugging Face config.json)");
  std::string problem;
  const nlohmann::json json = parse_json(read_file(path), &problem);
  if (json.is_discarded()) throw Error(path + ": not JSON (" + problem + ")");
  if (!json.is_object()) throw Error(path + ": expected a JSON object");
  return json;
}

int64_t positive(const nlohmann::json& json, const std::string& path, const char* key, int64_t fallback = 0) {
  if (!json.contains(key)) {
    if (fallback > 0) return fallback;
    throw Error(path + ": key '" + key + "' is missing");
  }
  const auto& value = json[key];
  if (!value.is_number_integer() || value.get<int64_t>() <= 0 || value.get<int64_t>() > (int64_t{1} << 31))
    throw Error(path + ": key '" + key + "' = " + value.dump() + ": expected a positive integer");
  return value.get<int64_t>();
}

void expect_string(const nlohmann::json& json, const std::string& path, const char* key, const char* allowed) {
  if (json.contains(key) && json[key] != allowed)
    throw Error(path + ": key '" + key + "' = " + json[key].dump() + ": mpt's BERT supports only \"" + allowed + "\"");
}

}  // namespace

BertConfig read_hf_bert_config(const std::string& path) {
  const std::string file = std::filesystem::is_directory(path) ? path + "/config.json" : path;
  const nlohmann::json json = parse_file(file);
  expect_string(json, file, "model_type", "bert");
  expect_string(json, file, "hidden_act", "gelu");
  expect_string(json, file, "position_embedding_type", "absolute");
  BertConfig config;
  config.vocab_size = positive(json, file, "vocab_size");
  config.hidden = positive(json, file, "hidden_size");
  config.layers = positive(json, file, "num_hidden_layers");
  config.heads = positive(json, file, "num_attention_heads");
  config.intermediate = positive(json, file, "intermediate_size");
  config.max_positions = positive(json, file, "max_position_embeddings", 512);
  config.type_vocab = positive(json, file, "type_vocab_size", 2);
  if (json.contains("layer_norm_eps")) {
    if (!json["layer_norm_eps"].is_number() || !(json["layer_norm_eps"].get<double>() > 0))
      throw Error(file + ": key 'layer_norm_eps' = " + json["layer_norm_eps"].dump() + ": expected a positive number");
    config.layer_norm_eps = json["layer_norm_eps"].get<double>();
  }
  if (json.contains("pad_token_id") && !json["pad_token_id"].is_null()) {
    if (!json["pad_token_id"].is_number_integer() || json["pad_token_id"].get<int64_t>() < 0 ||
        json["pad_token_id"].get<int64_t>() >= config.vocab_size)
      throw Error(file + ": key 'pad_token_id' = " + json["pad_token_id"].dump() + ": expected a token id");
    config.pad_id = json["pad_token_id"].get<int64_t>();
  }
  if (config.hidden % config.heads != 0)
    throw Error(file + ": hidden_size " + std::to_string(config.hidden) + " is not a multiple of num_attention_heads " +
                std::to_string(config.heads));
  return config;
}

nlohmann::ordered_json hf_bert_config(const BertConfig& config) {
  const bool mlm = config.head == "mlm";
  nlohmann::ordered_json json = {
      {"architectures", {mlm ? "BertForMaskedLM" : "BertForSequenceClassification"}},
      {"model_type", "bert"},
      {"vocab_size", config.vocab_size},
      {"hidden_size", config.hidden},
      {"num_hidden_layers", config.layers},
      {"num_attention_heads", config.heads},
      {"intermediate_size", config.intermediate},
      {"hidden_act", "gelu"},
      {"hidden_dropout_prob", config.dropout},
      {"attention_probs_dropout_prob", config.dropout},
      {"max_position_embeddings", config.max_positions},
      {"type_vocab_size", config.type_vocab},
      {"layer_norm_eps", config.layer_norm_eps},
      {"pad_token_id", config.pad_id},
      {"position_embedding_type", "absolute"},
      {"tie_word_embeddings", true},
  };
  if (!mlm) json["num_labels"] = config.num_classes;
  return json;
}

}  // namespace mpt::models
