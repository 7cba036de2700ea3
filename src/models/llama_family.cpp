// The Llama family's descriptor (see llama.h): its keys, its architecture from a preset or a config.json (both ways),
// its checks. Keys and defaults of config.json follow transformers' LlamaConfig.
#include <fmt/format.h>

#include "common/echo.h"
#include "common/error.h"
#include "hardware/hardware.h"
#include "models/hf_config.h"
#include "models/llama.h"

namespace mpt::models {
namespace {

// The spec keys only Llama reads (model.hf_config reads alike in BERT).
struct LlamaOptions {
  std::string hf_config;
};

const keys::OptionTable<LlamaOptions>& llama_options() {
  static const keys::OptionTable<LlamaOptions> table = [] {
    keys::OptionTable<LlamaOptions> options;
    options.add("model.hf_config", &LlamaOptions::hf_config, kHfConfigDoc).path();
    return options;
  }();
  return table;
}

const char* const kNeedsHfConfig =
    "llama: takes its architecture from model.hf_config (a Hugging Face config.json); set it, or name a preset "
    "(llama-tiny|135m)";

void expect_value(const nlohmann::json& json, const std::string& file, const char* key, const nlohmann::json& allowed) {
  if (json.contains(key) && !json[key].is_null() && json[key] != allowed)
    throw Error(file + ": key '" + key + "' = " + echo(json[key].dump()) + ": mpt's Llama supports only " +
                allowed.dump());
}

// transformers 5 keeps rope_theta in rope_parameters; earlier files at the top level, with rope_scaling beside it.
double rope_theta(const nlohmann::json& json, const std::string& file) {
  for (const char* key : {"rope_parameters", "rope_scaling"}) {
    if (!json.contains(key) || json[key].is_null()) continue;
    if (!json[key].is_object()) throw Error(file + ": key '" + key + "': expected an object");
    expect_value(json[key], file + ": " + key, "rope_type", "default");
    expect_value(json[key], file + ": " + key, "type", "default");
    if (json[key].contains("rope_theta")) return hf_config_positive(json[key], file + ": " + key, "rope_theta", 1e4);
  }
  return hf_config_positive(json, file, "rope_theta", 1e4);
}

void check_fits_in_memory(const LlamaConfig& c, const std::string& file) {
  const double h = static_cast<double>(c.hidden), attention = static_cast<double>(c.heads * c.head_dim),
               kv = static_cast<double>(c.kv_heads * c.head_dim);
  const double per_layer = h * (2 * attention + 2 * kv) + 3 * h * static_cast<double>(c.intermediate) + 2 * h;
  const double parameters =
      static_cast<double>(c.layers) * per_layer + (c.tie_embeddings ? 1 : 2) * static_cast<double>(c.vocab_size) * h;
  const double bytes = 4 * parameters, memory = static_cast<double>(hardware::physical_memory_bytes());
  if (memory > 0 && bytes > memory)
    throw Error(
        fmt::format("{}: about {:.3g} parameters, {:.1f} GiB of FP32 weights alone, more than this machine's "
                    "{:.1f} GiB of memory",
                    file, parameters, bytes / (1 << 30), memory / (1 << 30)));
}

LlamaConfig llama_architecture(const ModelConfig& config) {
  const LlamaOptions options = llama_options().read(config.options);
  if (config.name != "llama") return llama_preset(config.name);
  if (options.hf_config.empty()) throw UsageError(std::string("model.name: ") + kNeedsHfConfig);
  return read_hf_llama_config(options.hf_config);
}

Model build_llama(const ModelConfig& config, const MemoryConfig& memory, const data::SampleShape& sample,
                  const precision::ModulePolicy& policy) {
  LlamaConfig llama = llama_architecture(config);
  if (!sample.causal)
    throw UsageError("model.name: " + config.name +
                     " is a causal language model: it trains on next-token targets (data.name: causal_lm)");
  if (config.name == "llama") {
    if (llama.vocab_size < sample.vocab_size)
      throw UsageError(llama_options().read(config.options).hf_config + ": vocab_size " +
                       std::to_string(llama.vocab_size) + " is smaller than the tokenizer's " +
                       std::to_string(sample.vocab_size) + " tokens");
  } else {
    llama.vocab_size = sample.vocab_size;
  }
  if (sample.seq_len > llama.max_positions)
    throw UsageError("data.seq_len = " + std::to_string(sample.seq_len) + " exceeds " + config.name + "'s " +
                     std::to_string(llama.max_positions) + " positions");
  llama.recompute = memory.activation_checkpointing;
  llama.eot_id = sample.eot_id;
  llama.document_attention = sample.document_attention;
  return std::make_shared<LlamaForCausalLmImpl>(llama, policy);
}

std::vector<ModelProblem> llama_problems(const ModelConfig& config) {
  return hf_config_problems(config, llama_options().read(config.options).hf_config, "llama", kNeedsHfConfig);
}

nlohmann::ordered_json export_config(const ModelConfig& config, const WeightShapes& weights) {
  LlamaConfig llama = llama_architecture(config);
  llama.vocab_size = weight_rows(weights, "model.embed_tokens.weight", "a Llama's weights");
  llama.tie_embeddings = !weights.contains("lm_head.weight");
  return hf_llama_config(llama);
}

}  // namespace

LlamaConfig read_hf_llama_config(const std::string& path) {
  std::string file;
  const nlohmann::json json = read_hf_config_json(path, file);
  expect_value(json, file, "model_type", "llama");
  expect_value(json, file, "hidden_act", "silu");
  expect_value(json, file, "attention_bias", false);
  expect_value(json, file, "mlp_bias", false);
  LlamaConfig config;
  config.vocab_size = hf_config_size(json, file, "vocab_size", 0, int64_t{1} << 24);
  config.hidden = hf_config_size(json, file, "hidden_size", 0, 65536);
  config.intermediate = hf_config_size(json, file, "intermediate_size", 0, int64_t{1} << 20);
  config.layers = hf_config_size(json, file, "num_hidden_layers", 0, 512);
  config.heads = hf_config_size(json, file, "num_attention_heads", 0, 65536);
  config.kv_heads = hf_config_size(json, file, "num_key_value_heads", config.heads, 65536);
  if (config.heads % config.kv_heads != 0)
    throw Error(fmt::format("{}: num_attention_heads {} is not a multiple of num_key_value_heads {}", file,
                            config.heads, config.kv_heads));
  const bool head_dim_given = json.contains("head_dim") && !json["head_dim"].is_null();
  if (!head_dim_given && config.hidden % config.heads != 0)
    throw Error(fmt::format("{}: hidden_size {} is not a multiple of num_attention_heads {}", file, config.hidden,
                            config.heads));
  config.head_dim = head_dim_given ? hf_config_size(json, file, "head_dim", 0, 65536) : config.hidden / config.heads;
  if (config.head_dim % 2 != 0) throw Error(file + ": head_dim " + std::to_string(config.head_dim) + " is odd");
  config.max_positions = hf_config_size(json, file, "max_position_embeddings", 2048, int64_t{1} << 20);
  config.rms_norm_eps = hf_config_positive(json, file, "rms_norm_eps", 1e-6);
  config.rope_theta = rope_theta(json, file);
  config.tie_embeddings = false;  // LlamaConfig's default
  if (json.contains("tie_word_embeddings")) {
    if (!json["tie_word_embeddings"].is_boolean())
      throw Error(file + ": key 'tie_word_embeddings' = " + echo(json["tie_word_embeddings"].dump()) +
                  ": expected true or false");
    config.tie_embeddings = json["tie_word_embeddings"].get<bool>();
  }
  check_fits_in_memory(config, file);
  return config;
}

nlohmann::ordered_json hf_llama_config(const LlamaConfig& config) {
  nlohmann::ordered_json json = {
      {"architectures", {"LlamaForCausalLM"}},
      {"model_type", "llama"},
      {"vocab_size", config.vocab_size},
      {"hidden_size", config.hidden},
      {"intermediate_size", config.intermediate},
      {"num_hidden_layers", config.layers},
      {"num_attention_heads", config.heads},
      {"num_key_value_heads", config.kv_heads},
      {"head_dim", config.head_dim},
      {"hidden_act", "silu"},
      {"max_position_embeddings", config.max_positions},
      {"rms_norm_eps", config.rms_norm_eps},
      {"rope_theta", config.rope_theta},
      {"rope_parameters", {{"rope_type", "default"}, {"rope_theta", config.rope_theta}}},
      {"attention_bias", false},
      {"attention_dropout", 0.0},
      {"mlp_bias", false},
      {"tie_word_embeddings", config.tie_embeddings},
      {"initializer_range", 0.02},
      {"torch_dtype", "float32"},
  };
  if (config.eot_id >= 0) json["eos_token_id"] = config.eot_id;
  return json;
}

const ModelFamily& llama_family() {
  static const ModelFamily family{"llama",
                                  "Llama",
                                  data::Modality::kTokens,
                                  {"llama-tiny", "llama-135m", "llama"},
                                  llama_options().keys(),
                                  /*takes_dropout=*/false,
                                  /*fp32_modules=*/{"*layernorm", "model.norm", "lm_head"},
                                  {Recompute::kNone, Recompute::kFull, Recompute::kSelective},
                                  build_llama,
                                  llama_problems,
                                  /*hf_base_prefix=*/"model",
                                  export_config};
  return family;
}

}  // namespace mpt::models
