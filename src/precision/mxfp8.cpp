// MXFP8 Linear layers (see mxfp8.h). M = rows of the input (batch x positions), K = in_features, N = out_features.
#include "precision/mxfp8.h"

#include "ops/mxfp8.h"
#include "precision/gemm_formats.h"
#include "precision/low_precision_linear.h"

namespace mpt::precision {
namespace {

// a (P, R) times b (Q, R) transposed through MXFP8, both blocked along R. When R is not a multiple of a block, both
// are padded with zeros to the next one: the last block is then a partial one, as the MX spec allows, since zeros
// change neither a block's amax nor the sums.
torch::Tensor mx_product(const torch::Tensor& a, const torch::Tensor& b, torch::ScalarType out) {
  const int64_t pad = (ops::kMxBlock - a.size(1) % ops::kMxBlock) % ops::kMxBlock;
  if (pad == 0) return ops::mxfp8_mm(ops::to_mxfp8(a), ops::to_mxfp8(b), out);
  return ops::mxfp8_mm(ops::to_mxfp8(torch::constant_pad_nd(a, {0, pad})),
                       ops::to_mxfp8(torch::constant_pad_nd(b, {0, pad})), out);
}

// Both operands of each GEMM blocked along its reduction dimension; block scales keep no state, so `record` and
// the saved operands are the plain ones.
class Mxfp8LayerGemms : public LayerGemms {
 public:
  torch::Tensor forward(const torch::Tensor& rows, const torch::Tensor& weight, bool /*record*/,
                        torch::autograd::variable_list& saved) override {
    saved = {rows, weight};
    return mx_product(rows, weight, torch::kBFloat16);  // (M, N), blocked along K
  }
  std::pair<torch::Tensor, torch::Tensor> backward(const torch::Tensor& g, const torch::autograd::variable_list& saved,
                                                   torch::ScalarType x_dtype, torch::ScalarType w_dtype) override {
    const torch::Tensor &rows = saved[0], &weight = saved[1];
    // dX = dY W: (M, N) x (K, N)^T, blocked along N; dW = dY^T X: (N, M) x (K, M)^T, blocked along M, the rows.
    return {mx_product(g, weight.t().contiguous(), x_dtype),
            mx_product(g.t().contiguous(), rows.t().contiguous(), w_dtype)};
  }
};

}  // namespace

std::vector<GemmEligibility> mxfp8_eligibility(torch::nn::Module& model, const ModulePolicy& policy) {
  return linear_eligibility(model, policy, [](int64_t, int64_t) { return std::string(); });
}

GemmFormatKind mxfp8_format() {
  return {"MXFP8",
          {"mxfp8"},
          mxfp8_eligibility,
          [](const Fp8Config&, torch::nn::Module& model, const ModulePolicy& policy, torch::Device) {
            return std::make_unique<Mxfp8Gemms>(model, policy);
          }};
}

Mxfp8Gemms::Mxfp8Gemms(torch::nn::Module& model, const ModulePolicy& policy)
    : eligibility_(mxfp8_eligibility(model, policy)), gemms_(std::make_unique<Mxfp8LayerGemms>()) {
  const auto modules = model.named_modules("", /*include_self=*/false);
  for (const GemmEligibility& layer : eligibility_)
    if (layer.low_precision)
      weights_.insert(modules[layer.name]->as<torch::nn::Linear>()->weight.unsafeGetTensorImpl());
}

Mxfp8Gemms::~Mxfp8Gemms() = default;

torch::Tensor Mxfp8Gemms::linear(const torch::Tensor& x, const torch::Tensor& weight, const torch::Tensor& bias,
                                 bool /*recomputing: block scales keep no record*/) {
  if (!weights_.count(weight.unsafeGetTensorImpl())) return {};
  return low_precision_linear(x, weight, bias, *gemms_, /*record=*/false);
}

}  // namespace mpt::precision
