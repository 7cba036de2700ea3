// `mpt export CHECKPOINT|RUN_DIR --format safetensors|torch|hf --out FILE`: a run's FP32 weights in the formats
// PyTorch users load, with torchvision / Hugging Face names; hf writes a folder from_pretrained loads.
#include <algorithm>
#include <filesystem>
#include <iostream>

#include "app/commands.h"
#include "common/error.h"
#include "common/files.h"
#include "config/load.h"
#include "io/checkpoint.h"
#include "io/weights.h"
#include "models/hf_config.h"
#include "models/registry.h"
#include "run/sections.h"

namespace mpt::app {
namespace {

int64_t rows_of(const io::NamedTensorList& weights, const std::string& name, const std::string& checkpoint) {
  for (const auto& [key, tensor] : weights)
    if (key == name) return tensor.size(0);
  throw Error(checkpoint + ": no tensor '" + name + "' (not a BERT checkpoint of this head?)");
}

// A Hugging Face model folder: config.json from the run's spec (the head count is not in the weights) with the
// vocabulary and classes the weights have, and model.safetensors; the decoder stays tied to the word embeddings.
void write_hf_folder(const std::string& checkpoint, const io::NamedTensorList& weights, const std::string& out) {
  const std::filesystem::path run_dir = std::filesystem::path(checkpoint).parent_path().parent_path();
  const std::string spec_path = (run_dir / "config.yaml").string();
  if (!std::filesystem::is_regular_file(spec_path))
    throw UsageError("--format hf: " + checkpoint + " is not inside a run directory (no " + spec_path +
                     " to take the architecture from)");
  const models::ModelConfig model = run::read_sections(config::load_spec(spec_path, {})).model;
  if (models::model_family(model.name).prefix != "bert")
    throw UsageError("--format hf exports BERT runs; " + spec_path + " has model.name: " + model.name);
  models::BertConfig bert = models::bert_architecture(model);
  bert.vocab_size = rows_of(weights, "bert.embeddings.word_embeddings.weight", checkpoint);
  if (bert.head == "classification") bert.num_classes = rows_of(weights, "classifier.weight", checkpoint);
  std::filesystem::create_directories(out);
  io::write_weights(out + "/model.safetensors", weights, "safetensors");
  write_file_atomically(out + "/config.json", models::hf_bert_config(bert).dump(2) + "\n");
}

}  // namespace

int run_export(const ExportOptions& options) {
  std::string checkpoint = options.source;
  if (std::filesystem::is_directory(options.source)) {  // a run directory: its newest checkpoint that verifies
    const std::string folder = options.source + "/checkpoints";
    if (!std::filesystem::is_directory(folder))
      throw UsageError(options.source + ": not a run directory (no checkpoints/)");
    // Read-only: a run still training may be writing its next checkpoint next to these.
    std::vector<std::string> candidates;
    for (const auto& entry : std::filesystem::directory_iterator(folder))
      if (entry.path().extension() == ".mpt") candidates.push_back(entry.path().string());
    std::sort(candidates.rbegin(), candidates.rend());  // step-numbered names: newest first
    checkpoint.clear();
    for (const auto& candidate : candidates) {
      const std::string why = io::verify_checkpoint(candidate);
      if (why.empty()) {
        checkpoint = candidate;
        break;
      }
      std::cerr << "mpt: skipping " << candidate << ": " << why << "\n";
    }
    if (checkpoint.empty()) throw Error(folder + ": no valid checkpoint to export");
  } else if (!std::filesystem::is_regular_file(options.source)) {
    throw UsageError(options.source + ": no such checkpoint or run directory");
  }
  const io::NamedTensorList weights = io::read_checkpoint_weights(checkpoint);
  if (options.format == "hf")
    write_hf_folder(checkpoint, weights, options.out);
  else
    io::write_weights(options.out, weights, options.format);
  int64_t values = 0;
  for (const auto& [name, tensor] : weights) values += tensor.numel();
  std::cout << "exported " << weights.size() << " tensors (" << values << " values) from " << checkpoint << " to "
            << options.out << " (" << options.format << ")\n";
  return kExitOk;
}

}  // namespace mpt::app
