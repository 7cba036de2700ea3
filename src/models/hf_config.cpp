// config.json's keys, and config.json <-> BertConfig (see hf_config.h). Keys and defaults follow transformers'
// BertConfig.
#include "models/hf_config.h"

#include <filesystem>
#include <fstream>

#include <fmt/format.h>

#include "common/echo.h"
#include "common/error.h"
#include "common/files.h"
#include "common/json.h"
#include "hardware/hardware.h"

namespace mpt::models {
namespace {

nlohmann::json parse_file(const std::string& path) {
  if (!std::ifstream(path)) throw Error(path + ": cannot open (expected a Hugging Face config.json)");
  std::string problem;
  const nlohmann::json json = parse_json(read_file(path, /*max_bytes=*/1 << 20), &problem);  // a config is ~1 kB
  if (json.is_discarded()) throw Error(path + ": not JSON (" + problem + ")");
  if (!json.is_object()) throw Error(path + ": expected a JSON object");
  return json;
}

}  // namespace

nlohmann::json read_hf_config_json(const std::string& path, std::string& file) {
  file = std::filesystem::is_directory(path) ? path + "/config.json" : path;
  return parse_file(file);
}

int64_t hf_config_size(const nlohmann::json& json, const std::string& file, const char* key, int64_t fallback,
                       int64_t ceiling) {
  if (!json.contains(key)) {
    if (fallback > 0) return fallback;
    throw Error(file + ": key '" + key + "' is missing");
  }
  const auto& value = json[key];
  if (!value.is_number_integer() || value.get<int64_t>() <= 0 || value.get<int64_t>() > ceiling)
    throw Error(
        fmt::format("{}: key '{}' = {}: expected a positive integer up to {}", file, key, echo(value.dump()), ceiling));
  return value.get<int64_t>();
}

double hf_config_positive(const nlohmann::json& json, const std::string& file, const char* key, double fallback) {
  if (!json.contains(key)) return fallback;
  if (!json[key].is_number() || !(json[key].get<double>() > 0))
    throw Error(file + ": key '" + key + "' = " + echo(json[key].dump()) + ": expected a positive number");
  return json[key].get<double>();
}

int64_t weight_rows(const WeightShapes& weights, const std::string& name, const std::string& what) {
  const auto found = weights.find(name);
  if (found == weights.end() || found->second.empty()) throw Error("no tensor '" + name + "' (not " + what + "?)");
  return found->second[0];
}

std::vector<ModelProblem> hf_config_problems(const ModelConfig& config, const std::string& hf_config,
                                             const std::string& bare_name, const std::string& needs) {
  std::vector<ModelProblem> problems;
  if (!hf_config.empty())
    if (const std::string why = path_problem(hf_config, PathKind::kAny); !why.empty())
      problems.push_back({"model.hf_config", hf_config + ": " + why});
  if (config.name == bare_name && hf_config.empty()) problems.push_back({"model.name", needs});
  return problems;
}

namespace {

// The largest value each size may take: far above every published BERT (and GPT-3's 96 layers of width 12,288),
// low enough that no product of them overflows and no layer loop runs for minutes before the memory check.
struct SizeKey {
  const char* key;
  int64_t fallback;  // 0: required
  int64_t ceiling;
};
constexpr SizeKey kVocabSize{"vocab_size", 0, int64_t{1} << 24}, kHiddenSize{"hidden_size", 0, 65536},
    kLayers{"num_hidden_layers", 0, 512}, kHeads{"num_attention_heads", 0, 65536},
    kIntermediate{"intermediate_size", 0, int64_t{1} << 20},
    kPositions{"max_position_embeddings", 512, int64_t{1} << 20}, kTypeVocab{"type_vocab_size", 2, 65536};

int64_t size_of(const nlohmann::json& json, const std::string& path, const SizeKey& size) {
  return hf_config_size(json, path, size.key, size.fallback, size.ceiling);
}

// The FP32 weights the architecture needs, by the key that sizes each part, refused before anything is allocated
// when they alone exceed this machine's memory (training needs about 4x: gradients and Adam's two moments).
void check_fits_in_memory(const BertConfig& c, const std::string& path) {
  const double h = static_cast<double>(c.hidden),
               per_layer = 4 * (h * h + h) + 2 * h * c.intermediate + c.intermediate + 5 * h;
  const std::pair<const char*, double> parts[] = {{kVocabSize.key, static_cast<double>(c.vocab_size) * h},
                                                  {kPositions.key, static_cast<double>(c.max_positions) * h},
                                                  {kTypeVocab.key, static_cast<double>(c.type_vocab) * h},
                                                  {kLayers.key, static_cast<double>(c.layers) * per_layer}};
  double parameters = 0;
  const std::pair<const char*, double>* largest = &parts[0];
  for (const auto& part : parts) {
    parameters += part.second;
    if (part.second > largest->second) largest = &part;
  }
  const double bytes = 4 * parameters, memory = static_cast<double>(hardware::physical_memory_bytes());
  if (memory > 0 && bytes > memory)
    throw Error(
        fmt::format("{}: about {:.3g} parameters, {:.1f} GiB of FP32 weights alone, more than this machine's "
                    "{:.1f} GiB of memory; the largest part is sized by '{}' (with hidden_size {})",
                    path, parameters, bytes / (1 << 30), memory / (1 << 30), largest->first, c.hidden));
}

void expect_string(const nlohmann::json& json, const std::string& path, const char* key, const char* allowed) {
  if (json.contains(key) && json[key] != allowed)
    throw Error(path + ": key '" + key + "' = " + echo(json[key].dump()) + ": mpt's BERT supports only \"" + allowed +
                "\"");
}

}  // namespace

BertConfig read_hf_bert_config(const std::string& path) {
  std::string file;
  const nlohmann::json json = read_hf_config_json(path, file);
  expect_string(json, file, "model_type", "bert");
  expect_string(json, file, "hidden_act", "gelu");
  expect_string(json, file, "position_embedding_type", "absolute");
  BertConfig config;
  config.vocab_size = size_of(json, file, kVocabSize);
  config.hidden = size_of(json, file, kHiddenSize);
  config.layers = size_of(json, file, kLayers);
  config.heads = size_of(json, file, kHeads);
  config.intermediate = size_of(json, file, kIntermediate);
  config.max_positions = size_of(json, file, kPositions);
  config.type_vocab = size_of(json, file, kTypeVocab);
  config.layer_norm_eps = hf_config_positive(json, file, "layer_norm_eps", config.layer_norm_eps);
  if (json.contains("pad_token_id") && !json["pad_token_id"].is_null()) {
    if (!json["pad_token_id"].is_number_integer() || json["pad_token_id"].get<int64_t>() < 0 ||
        json["pad_token_id"].get<int64_t>() >= config.vocab_size)
      throw Error(file + ": key 'pad_token_id' = " + echo(json["pad_token_id"].dump()) + ": expected a token id");
    config.pad_id = json["pad_token_id"].get<int64_t>();
  }
  if (config.hidden % config.heads != 0)
    throw Error(file + ": hidden_size " + std::to_string(config.hidden) + " is not a multiple of num_attention_heads " +
                std::to_string(config.heads));
  check_fits_in_memory(config, file);
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
