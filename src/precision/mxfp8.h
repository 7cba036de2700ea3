// MXFP8 training of Linear layers (precision.mode fp8, precision.fp8.recipe mxfp8): every GEMM of the layer - the
// forward, the input gradient and the weight gradient - takes both operands in MXFP8 (ops/mxfp8.h), each blocked
// along that GEMM's reduction dimension, as the OCP MX recipe and torchao's MXLinear do: x and W along K forward,
// dY and W along N for dX, dY and X along the batch for dW. A block's scale comes from its own amax, so there is no
// scale state to keep, delay or checkpoint. Weights, their gradients' accumulation and the optimizer stay FP32.
#pragma once

#include <torch/torch.h>

#include <memory>
#include <unordered_set>
#include <vector>

#include "precision/gemm_format.h"
#include "precision/policy.h"

namespace mpt::precision {

class LayerGemms;

// Every Linear layer of `model` with its verdict: MXFP8 unless the policy keeps it FP32. Any size: a reduction
// that is not a multiple of a block ends in a partial block (zero-padded).
std::vector<GemmEligibility> mxfp8_eligibility(torch::nn::Module& model, const ModulePolicy& policy);

struct GemmFormatKind;
// MXFP8 as a GEMM format (precision/gemm_formats.h): recipe mxfp8.
GemmFormatKind mxfp8_format();

class Mxfp8Gemms : public LowPrecisionGemms {
 public:
  Mxfp8Gemms(torch::nn::Module& model, const ModulePolicy& policy);
  ~Mxfp8Gemms() override;
  const char* name() const override { return "MXFP8"; }
  const std::vector<GemmEligibility>& eligibility() const override { return eligibility_; }
  torch::Tensor linear(const torch::Tensor& x, const torch::Tensor& weight, const torch::Tensor& bias,
                       bool recomputing) override;

 private:
  std::vector<GemmEligibility> eligibility_;
  std::unordered_set<const void*> weights_;  // the eligible layers' weights (TensorImpl)
  std::unique_ptr<LayerGemms> gemms_;        // one for all: block scales keep no per-layer state
};

}  // namespace mpt::precision
