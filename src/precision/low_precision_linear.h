// What every low-precision GEMM format shares (FP8 with per-tensor scales, MXFP8 with block scales, the next one):
// the autograd function around a layer's three products, and the walk over a model's Linear layers that gives
// each its verdict. A format brings only its products (LayerGemms) and its shape rule.
#pragma once

#include <torch/torch.h>

#include <functional>
#include <string>
#include <utility>
#include <vector>

#include "precision/gemm_format.h"
#include "precision/policy.h"

namespace mpt::precision {

// One layer's GEMMs in a format. Rows are the input flattened to (M, K); the weight is (N, K).
class LayerGemms {
 public:
  virtual ~LayerGemms() = default;
  // rows W^T as (M, N) BF16; `saved` receives what backward needs, in the form the format keeps it. `record`: this
  // pass counts (not a recomputation in backward, not evaluation), for formats that record amaxes.
  virtual torch::Tensor forward(const torch::Tensor& rows, const torch::Tensor& weight, bool record,
                                torch::autograd::variable_list& saved) = 0;
  // dX = dY W as (M, K) in `x_dtype` and dW = dY^T X as (N, K) in `w_dtype`, from dY as (M, N).
  virtual std::pair<torch::Tensor, torch::Tensor> backward(const torch::Tensor& grad_rows,
                                                           const torch::autograd::variable_list& saved,
                                                           torch::ScalarType x_dtype, torch::ScalarType w_dtype) = 0;
};

// y = x W^T + b through `gemms` (x of any rank, features last), differentiable in x, W and b. Autocast is off inside
// (the format picks its dtypes); the bias is added in BF16 and its gradient summed in FP32. `gemms` must outlive
// the backward pass.
torch::Tensor low_precision_linear(const torch::Tensor& x, const torch::Tensor& weight, const torch::Tensor& bias,
                                   LayerGemms& gemms, bool record);

// Why a Linear layer of these sizes cannot take the format ("BF16: in_features 30 not a multiple of 16"), or "".
using ShapeRule = std::function<std::string(int64_t in_features, int64_t out_features)>;

// Every Linear layer of `model` with its verdict: in the format unless the policy keeps it FP32 or `shape_rule`
// refuses it.
std::vector<GemmEligibility> linear_eligibility(torch::nn::Module& model, const ModulePolicy& policy,
                                                const ShapeRule& shape_rule);

}  // namespace mpt::precision
