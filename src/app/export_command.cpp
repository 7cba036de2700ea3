// `mpt export CHECKPOINT|RUN_DIR --format safetensors|torch|hf --out FILE`: a run's FP32 weights in the formats
// PyTorch users load, with torchvision / Hugging Face names; hf writes a folder from_pretrained and pipeline() load
// (run/hf_export.h).
#include <iostream>

#include "app/checkpoint_source.h"
#include "app/commands.h"
#include "common/error.h"
#include "io/checkpoint.h"
#include "io/weights.h"
#include "run/hf_export.h"

namespace mpt::app {

int run_export(const ExportOptions& options) {
  if (options.out.empty()) throw UsageError("--out: expected a file (a folder for --format hf), got an empty path");
  const std::string checkpoint = checkpoint_in(options.source);
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
