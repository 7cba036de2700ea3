// What `mpt numerics` attaches to a model's GemmRouter in place of a training format: every projection computed in
// FP32 (the reference) or, for chosen layers, in a candidate format through the same kernels and casts training
// uses (autocast's BF16/FP16 linear, the FP8 and MXFP8 formats' GEMMs). On a measuring reference pass each layer's
// output is also computed in every format from the same FP32 input, so one layer's error is not blamed on another's.
#pragma once

#include <torch/torch.h>

#include <memory>
#include <optional>
#include <set>
#include <string>
#include <unordered_map>
#include <vector>

#include "precision/fp8_config.h"
#include "precision/gemm_format.h"
#include "precision/numeric_formats.h"

namespace mpt::precision {

// Sums of a reference's energy and of its difference from a candidate, over every tensor compared.
struct ErrorSums {
  double signal = 0.0, noise = 0.0;
  int64_t tensors = 0;
  void add(const torch::Tensor& reference, const torch::Tensor& candidate);
  double sqnr_db() const;   // 10 log10(signal / noise); +inf when equal, NaN when nothing (or only zeros) was compared
  double relative() const;  // ||reference - candidate|| / ||reference||
};

// One layer under one format.
struct LayerInFormat {
  std::string why_not;                // "" when the format takes the layer: "BF16: in_features 30 not ..."
  ErrorSums local;                    // the layer's output from the reference's FP32 input
  ErrorSums input_grad, weight_grad;  // after one backward with every layer the format takes in it
  ErrorSums alone_logits;             // the model's logits with this layer alone in the format
  double alone_loss_delta = 0.0;      // |loss - reference loss|, summed over batches
  RangeStats input, weight, grad_output;
};

struct LayerNumerics {
  std::string name;  // the module ("encoder.layer.0.attention.self.query"), or the weight's owner
  int64_t in_features = 0, out_features = 0;
  std::vector<LayerInFormat> formats;  // in the probe's format order
};

class GemmProbe : public LowPrecisionGemms {
 public:
  GemmProbe(torch::nn::Module& model, std::vector<NumericFormat> formats, const Fp8Config& fp8, double loss_scale,
            torch::Device device);
  ~GemmProbe() override;

  // The passes that follow: every layer in FP32; with `measure`, each layer's output also in every format (its
  // local error), its input's and weight's range statistics, and in backward its output gradient's and the reference
  // input gradient the candidates' are compared with.
  void reference(bool measure);
  // The passes that follow: the layers named in `layers` in format number `format`, the others in FP32; in backward,
  // the input gradients, divided by `grad_scale` (the loss scale the backward ran under), are compared with the
  // reference's.
  void candidate(size_t format, std::set<std::string> layers, double grad_scale);

  const std::vector<NumericFormat>& numeric_formats() const { return formats_; }
  std::vector<LayerNumerics>& layers() { return layers_; }
  // The layers format number `format` takes, by name.
  std::set<std::string> eligible(size_t format) const;
  // The weight layer number `layer` multiplies by (a tied decoder's: the embeddings).
  const torch::Tensor& weight(size_t layer) const { return weights_[layer]; }

  const char* name() const override { return "numerics probe"; }
  const std::vector<GemmEligibility>& eligibility() const override { return eligibility_; }
  torch::Tensor linear(const torch::Tensor& x, const torch::Tensor& weight, const torch::Tensor& bias,
                       bool recomputing) override;

 private:
  torch::Tensor in_format(size_t format, const torch::Tensor& x, const torch::Tensor& weight,
                          const torch::Tensor& bias);
  void measure_local(size_t layer, const torch::Tensor& x, const torch::Tensor& weight, const torch::Tensor& bias,
                     const torch::Tensor& reference);
  torch::Tensor watch_input_grad(size_t layer, const torch::Tensor& x);
  std::optional<size_t> layer_index(const torch::Tensor& weight);

  std::vector<NumericFormat> formats_;
  Fp8Config fp8_;
  double loss_scale_;
  std::vector<std::unique_ptr<LowPrecisionGemms>> format_gemms_;  // per format: its training GEMMs, or null (autocast)
  std::vector<LayerNumerics> layers_;
  std::vector<torch::Tensor> weights_;                       // per layer
  std::unordered_map<const void*, size_t> by_weight_;        // the weight's TensorImpl -> layer
  std::unordered_map<const void*, std::string> functional_;  // other 2-D parameters -> their module
  std::vector<GemmEligibility> eligibility_;
  std::optional<size_t> format_;  // none: the reference
  bool measure_ = false;
  std::set<std::string> candidate_layers_;
  double grad_scale_ = 1.0;
  std::vector<torch::Tensor> reference_input_grads_;  // per layer, from the last reference backward
};

}  // namespace mpt::precision
