// `mpt export CHECKPOINT|RUN_DIR --format safetensors|torch|hf --out FILE`: a run's FP32 weights in the formats
// PyTorch users load, with torchvision / Hugging Face names; hf writes a folder from_pretrained and pipeline() load
// (run/hf_export.h).
#include <algorithm>
#include <filesystem>
#include <iostream>

#include "app/commands.h"
#include "common/error.h"
#include "common/files.h"
#include "io/checkpoint.h"
#include "io/weights.h"
#include "run/hf_export.h"

namespace mpt::app {

int run_export(const ExportOptions& options) {
  if (options.out.empty()) throw UsageError("--out: expected a file (a folder for --format hf), got an empty path");
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
  if (options.format == "hf") {
    for (const auto& warning : run::write_hf_folder(checkpoint, weights, options.out, options.force))
      std::cerr << "mpt: " << warning << "\n";
  } else {
    io::write_weights(options.out, weights, options.format);
  }
  int64_t values = 0;
  for (const auto& [name, tensor] : weights) values += tensor.numel();
  std::cout << "exported " << weights.size() << " tensors (" << values << " values) from " << checkpoint << " to "
            << options.out << " (" << options.format << ")\n";
  return kExitOk;
}

}  // namespace mpt::app
