// What `mpt numerics` attaches to a model's GemmRouter (every projection) and to its policy's runners (every other
// module: convolutions, norms, attention cores; and the loss): each computed in FP32 (the reference) or, for chosen
// layers, in a candidate format through the kernels and casts training uses (autocast, the FP8 and MXFP8 formats'
// GEMMs). On a measuring reference pass each layer's output is also computed in every format from the same FP32
// inputs, so one layer's error is not blamed on another's.
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
#include "precision/policy.h"

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
  std::string kind;  // "Linear", "Conv2d", "LayerNorm", "RMSNorm", "BatchNorm2d", "attention", "loss", ...
  int64_t in_features = 0, out_features = 0;  // a GEMM's (a convolution's: C_in k k and C_out); 0 for the others
  int64_t macs = 0;                           // multiply-adds per batch (0 for norms and the loss)
  std::vector<LayerInFormat> formats;         // in the probe's format order
};

class LayerProbe : public LowPrecisionGemms, public ModuleProbe {
 public:
  LayerProbe(torch::nn::Module& model, std::vector<NumericFormat> formats, const Fp8Config& fp8, double loss_scale,
             torch::Device device);
  ~LayerProbe() override;

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
  // The weight layer number `layer` multiplies by (a tied decoder's: the embeddings); undefined where it has none.
  const torch::Tensor& weight(size_t layer) const { return weights_[layer]; }

  const char* name() const override { return "numerics probe"; }
  const std::vector<GemmEligibility>& eligibility() const override { return eligibility_; }
  torch::Tensor linear(const torch::Tensor& x, const torch::Tensor& weight, const torch::Tensor& bias,
                       bool recomputing) override;
  // A module that holds no projection of its own (layer_probe_modules.cpp); one that does runs as it is.
  torch::Tensor run(const std::string& module, const std::string& kind, const Tensors& inputs,
                    const Forward& forward) override;

 private:
  size_t add_layer(LayerNumerics layer, const torch::Tensor& weight);
  std::optional<size_t> module_row(const std::string& module, const std::string& kind, const Tensors& inputs,
                                   const Forward& forward, torch::Tensor& first_output);
  // A Linear the model runs by itself through its runner (a classifier): measured as a module, no format's GEMM.
  size_t reached_outside_route(size_t layer);
  void measure_module(size_t layer, const Tensors& inputs, const Forward& forward, const torch::Tensor& reference);
  void watch_grad_output(size_t layer, const torch::Tensor& y);
  torch::Tensor in_format(size_t format, const torch::Tensor& x, const torch::Tensor& weight,
                          const torch::Tensor& bias);
  void measure_local(size_t layer, const torch::Tensor& x, const torch::Tensor& weight, const torch::Tensor& bias,
                     const torch::Tensor& reference);
  torch::Tensor watch_input_grad(size_t layer, size_t input, const torch::Tensor& x);
  std::optional<size_t> layer_index(const torch::Tensor& weight);

  std::vector<NumericFormat> formats_;
  Fp8Config fp8_;
  double loss_scale_;
  std::vector<std::unique_ptr<LowPrecisionGemms>> format_gemms_;  // per format: its training GEMMs, or null (autocast)
  std::vector<LayerNumerics> layers_;
  std::vector<torch::Tensor> weights_;                                           // per layer
  std::unordered_map<const void*, size_t> by_weight_;                            // the weight's TensorImpl -> layer
  std::unordered_map<const void*, std::string> functional_;                      // other 2-D parameters -> their module
  std::unordered_map<std::string, std::shared_ptr<torch::nn::Module>> modules_;  // the model's, by name
  std::unordered_map<std::string, size_t> by_module_;                            // a module's row
  std::set<std::string> containers_;  // modules run through a runner that hold projections
  int64_t gemm_calls_ = 0;
  std::vector<GemmEligibility> eligibility_;
  std::optional<size_t> format_;  // none: the reference
  bool measure_ = false;
  std::set<std::string> candidate_layers_;
  double grad_scale_ = 1.0;
  std::vector<std::vector<torch::Tensor>> reference_input_grads_;  // per layer and input, the last reference backward
};

}  // namespace mpt::precision
