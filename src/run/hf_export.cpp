#include "run/hf_export.h"

#include <algorithm>
#include <filesystem>

#include "common/error.h"
#include "common/files.h"
#include "config/load.h"
#include "data/dataset.h"
#include "data/tokenizer.h"
#include "data/wordpiece.h"
#include "models/registry.h"
#include "run/sections.h"

namespace mpt::run {
namespace {

namespace fs = std::filesystem;

// BERT's special tokens, as bert-base-uncased names them; the vocabulary must hold each.
const char* const kSpecialTokens[][2] = {{"unk_token", "[UNK]"},
                                         {"sep_token", "[SEP]"},
                                         {"pad_token", "[PAD]"},
                                         {"cls_token", "[CLS]"},
                                         {"mask_token", "[MASK]"}};

// The special tokens map, after checking that the run's vocabulary is there and holds them.
nlohmann::json special_tokens(const ExperimentConfig& c) {
  const std::string& vocab = c.data.vocab;
  if (!fs::is_regular_file(vocab))
    throw Error("--format hf: the run's vocabulary " + vocab +
                " (data.vocab) is not there to copy; run the export from the folder the run was trained in");
  const data::Vocabulary words = data::Vocabulary::load(vocab);
  nlohmann::json special = nlohmann::json::object();
  for (const auto& [key, token] : kSpecialTokens) {
    (void)words.id(token);  // throws, naming the file, when the token is missing
    special[key] = token;
  }
  return special;
}

// vocab.txt as trained, and the settings that make BertTokenizer(Fast) split text as mpt's WordPiece did.
void write_tokenizer(const ExperimentConfig& c, const nlohmann::json& special, const std::string& out) {
  const std::string& vocab = c.data.vocab;
  nlohmann::json tokenizer = special;
  tokenizer["tokenizer_class"] = "BertTokenizer";
  tokenizer["do_lower_case"] = c.data.lowercase;
  tokenizer["strip_accents"] = nullptr;  // follows do_lower_case, as mpt's normalisation does
  tokenizer["tokenize_chinese_chars"] = true;
  tokenizer["do_basic_tokenize"] = true;
  tokenizer["model_max_length"] = c.data.seq_len;
  tokenizer["clean_up_tokenization_spaces"] = true;
  fs::copy_file(vocab, out + "/vocab.txt", fs::copy_options::overwrite_existing);
  write_file_atomically(out + "/tokenizer_config.json", tokenizer.dump(2) + "\n");
  write_file_atomically(out + "/special_tokens_map.json", special.dump(2) + "\n");
}

// A tokenizer.json as trained with, and the settings that make AutoTokenizer load it as a fast tokenizer whose end
// of text is the run's. Returns that token's id for config.json.
int64_t write_tokenizer_json(const ExperimentConfig& c, const std::string& out) {
  const std::string& source = c.data.tokenizer;
  const std::string file = fs::is_directory(source) ? source + "/tokenizer.json" : source;
  if (!fs::is_regular_file(file))
    throw Error("--format hf: the run's tokenizer " + file +
                " (data.tokenizer) is not there to copy; run the export from the folder the run was trained in");
  const auto tokenizer = data::read_tokenizer_json(file);
  const int64_t eot = data::end_of_text_id(*tokenizer, c.data.eot_token);
  const nlohmann::json settings = {{"tokenizer_class", "PreTrainedTokenizerFast"},
                                   {"eos_token", tokenizer->token(eot)},
                                   {"bos_token", tokenizer->token(eot)},
                                   {"model_max_length", c.data.seq_len},
                                   {"clean_up_tokenization_spaces", false}};
  fs::copy_file(file, out + "/tokenizer.json", fs::copy_options::overwrite_existing);
  write_file_atomically(out + "/tokenizer_config.json", settings.dump(2) + "\n");
  return eot;
}

// id2label/label2id from the dataset's classes, in the order the run numbered them.
std::string add_labels(const ExperimentConfig& c, nlohmann::ordered_json& config) {
  std::vector<std::string> labels;
  try {
    labels = data::text_classification_labels(c.data.root);
  } catch (const std::exception& e) {
    return std::string("--format hf: no class names (") + e.what() + "); pipelines will say LABEL_0, LABEL_1, ...";
  }
  if (static_cast<int64_t>(labels.size()) != config.value("num_labels", int64_t{0}))
    return "--format hf: " + c.data.root + " now has " + std::to_string(labels.size()) + " classes, the classifier " +
           std::to_string(config.value("num_labels", 0)) + "; class names left out";
  nlohmann::json id2label = nlohmann::json::object(), label2id = nlohmann::json::object();
  for (size_t i = 0; i < labels.size(); ++i) {
    id2label[std::to_string(i)] = labels[i];
    label2id[labels[i]] = i;
  }
  config["id2label"] = id2label;
  config["label2id"] = label2id;
  return "";
}

// What a Hugging Face loader reads from a model folder: weights in any of its formats and shardings, the config,
// and the tokenizer files of every kind (a stale tokenizer.json would win over the vocab.txt written here).
bool read_by_hf_loaders(const std::string& name) {
  static const char* const kExact[] = {"config.json",
                                       "generation_config.json",
                                       "model.safetensors",
                                       "model.safetensors.index.json",
                                       "pytorch_model.bin",
                                       "pytorch_model.bin.index.json",
                                       "tf_model.h5",
                                       "tf_model.h5.index.json",
                                       "flax_model.msgpack",
                                       "tokenizer.json",
                                       "tokenizer_config.json",
                                       "special_tokens_map.json",
                                       "added_tokens.json",
                                       "vocab.txt",
                                       "vocab.json",
                                       "merges.txt",
                                       "spiece.model",
                                       "sentencepiece.bpe.model",
                                       "tokenizer.model",
                                       "preprocessor_config.json"};
  if (std::find(std::begin(kExact), std::end(kExact), name) != std::end(kExact)) return true;
  const bool shard = name.rfind("model-", 0) == 0 || name.rfind("pytorch_model-", 0) == 0;
  return shard && (name.ends_with(".safetensors") || name.ends_with(".bin"));
}

// `out` made ready for a new model: created, or, holding files already, refused unless `force`, which removes what a
// loader would read there instead of the new files.
void prepare_folder(const std::string& out, bool force) {
  if (fs::exists(out) && !fs::is_directory(out))
    throw UsageError("--out " + out + ": a file; --format hf writes a folder");
  fs::create_directories(out);
  std::vector<fs::path> stale, other;
  for (const auto& entry : fs::directory_iterator(out))
    (read_by_hf_loaders(entry.path().filename().string()) ? stale : other).push_back(entry.path());
  if (stale.empty() && other.empty()) return;
  if (!force) {
    std::string names;
    for (const auto& path : stale.empty() ? other : stale)
      names += (names.empty() ? "" : ", ") + path.filename().string();
    throw UsageError("--out " + out + " already holds files (" + names +
                     "); a loader would mix them with the new model's. Choose an empty folder, or pass --force to "
                     "replace the model files there");
  }
  for (const auto& path : stale) fs::remove_all(path);
}

}  // namespace

std::vector<std::string> write_hf_folder(const std::string& checkpoint, const io::NamedTensorList& weights,
                                         const std::string& out, bool force) {
  const fs::path run_dir = fs::path(checkpoint).parent_path().parent_path();
  const std::string spec_path = (run_dir / "config.yaml").string();
  if (!fs::is_regular_file(spec_path))
    throw UsageError("--format hf: " + checkpoint + " is not inside a run directory (no " + spec_path +
                     " to take the architecture from)");
  const ExperimentConfig c = read_sections(config::load_spec(spec_path, {}));
  const models::ModelFamily& family = models::model_family(c.model.name);
  if (!family.hf_config)
    throw UsageError("--format hf exports BERT and Llama runs; " + spec_path + " has model.name: " + c.model.name);
  models::WeightShapes shapes;
  for (const auto& [name, tensor] : weights) shapes[name] = tensor.sizes().vec();
  nlohmann::ordered_json config;
  try {
    config = family.hf_config(c.model, shapes);
  } catch (const UsageError&) {
    throw;
  } catch (const Error& e) {
    throw Error(checkpoint + ": " + e.what());
  }
  const bool wordpiece = c.data.tokenizer.empty();
  const nlohmann::json special = wordpiece ? special_tokens(c) : nlohmann::json();
  std::vector<std::string> warnings;
  if (config.contains("num_labels") && c.data.name == "text_classification")
    if (std::string warning = add_labels(c, config); !warning.empty()) warnings.push_back(warning);
  prepare_folder(out, force);
  io::write_weights(out + "/model.safetensors", weights, "safetensors");
  if (wordpiece)
    write_tokenizer(c, special, out);
  else
    config["eos_token_id"] = config["bos_token_id"] = write_tokenizer_json(c, out);
  write_file_atomically(out + "/config.json", config.dump(2) + "\n");
  return warnings;
}

}  // namespace mpt::run
