// `mpt numerics`' measurement: the first N batches of a spec's training data through its model, FP32 as the
// reference and each candidate format in turn (precision/layer_probe.h). Per layer (projection, convolution, norm,
// attention core, the loss): its local error, the model's error with it alone in the format, the gradients' error
// with every layer the format takes in it, and its tensors' range statistics.
#pragma once

#include <torch/torch.h>

#include <string>
#include <vector>

#include "precision/layer_probe.h"
#include "run/sections.h"

namespace mpt::run {

struct NumericsOptions {
  int64_t batches = 4;
  std::vector<precision::NumericFormat> formats;
  bool alone = true;  // also each layer alone in each format: one forward per layer, format and batch
};

// The model's error with every layer a format takes in it.
struct FormatTotals {
  precision::ErrorSums logits;
  double loss_delta = 0.0;  // |loss - reference loss| summed over batches
};

struct NumericsReport {
  std::string model, data, weights;  // weights: model.init_from, or "" (the seed's initialisation)
  int64_t batches = 0, batch_size = 0;
  std::vector<precision::NumericFormat> formats;
  double loss_scale = 1.0;        // what FP16's backward multiplied the loss by: precision.loss_scale.init
  double reference_loss = 0.0;    // summed over batches
  std::vector<FormatTotals> all;  // per format
  std::vector<precision::LayerNumerics> layers;
  std::vector<bool> islands;  // per layer: the spec's precision.fp32_modules keep it FP32
  double seconds = 0.0;
  int64_t peak_tensor_bytes = 0, peak_process_bytes = 0;
};

NumericsReport measure_numerics(const ExperimentConfig& c, const NumericsOptions& options, torch::Device device);

}  // namespace mpt::run
