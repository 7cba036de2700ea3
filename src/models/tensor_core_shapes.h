// Tensor Core shapes: which of a model's GEMM and convolution dimensions keep a CUDA run off the full-rate path.
//
// NVIDIA's Tensor Cores run a GEMM or convolution at full rate when its dimensions are multiples of 16 bytes of
// the compute dtype: 8 elements for FP16/BF16, 4 for TF32 (the "Deep Learning Performance" guide: a Linear's
// batch rows, in_features and out_features; a convolution's input and output channels). Other sizes get padded
// tiles or kernels without Tensor Cores, so a hidden width of 1000 can cost more than one of 1024. mpt reports
// the misses and does not pad: layer widths and batch sizes are the experiment's to choose.
#pragma once

#include <nlohmann/json.hpp>

#include <string>
#include <vector>

#include "models/model.h"
#include "precision/policy.h"

namespace mpt::models {

struct ShapeMisfit {
  std::string where;  // a module name ("hidden.0") or a spec key ("data.batch_size")
  std::string dim;    // "out_features", "in_channels", "rows", ...
  int64_t value = 0;
  int64_t rounded = 0;  // the next multiple up
};

struct TensorCoreShapes {
  int64_t multiple = 0;  // elements per 16 bytes of the compute dtype; 0: the run does not use Tensor Cores
  std::vector<ShapeMisfit> misfits;
};

// Elements per 16 bytes in the dtype a CUDA run of `resolved_mode` gives Tensor Cores: 8 for mixed_bf16 and
// mixed_fp16, 4 for fp32 with TF32 allowed, 0 for plain FP32.
int64_t tensor_core_multiple(precision::Mode mode, bool tf32);

// The dimensions of `model`'s Linear and Conv2d modules (and its functional_gemm_dims) that are not multiples of
// tensor_core_multiple(precision.mode, precision.tf32), and the GEMM rows of a (micro-)batch of `batch_size` samples
// shaped like `sample` (batch_size, or batch_size x seq_len for text) when a checked Linear sees them. Modules in
// precision.fp32_modules are skipped (under mixed precision they do not run in the compute dtype; under TF32 they
// are the output layer and norms, sized by the data), and so are convolution input channels below the multiple
// (an image stem of 1 or 3 channels, which cuDNN pads itself).
TensorCoreShapes tensor_core_shapes(const ModelImpl& model, const precision::PrecisionConfig& precision,
                                    const data::SampleShape& sample, int64_t batch_size);

// One line for a log or a report: "every GEMM and convolution dimension is a multiple of 8", or the misfits with
// the sizes to round them to. Empty when multiple is 0.
std::string describe(const TensorCoreShapes& shapes);

// {"multiple": 8, "misfits": [{"where", "dim", "value", "rounded"}, ...]}; null when multiple is 0.
nlohmann::json to_json(const TensorCoreShapes& shapes);

}  // namespace mpt::models
