// Vision Transformer (Dosovitskiy et al.) with torchvision's module layout and state-dict names, so weights move
// between mpt and torchvision's vit_b_16 unchanged: "conv_proj" (the patch embedding), "class_token",
// "encoder.pos_embedding", "encoder.layers.encoder_layer_N.{ln_1, self_attention.{in_proj_weight, in_proj_bias,
// out_proj}, ln_2, mlp.0, mlp.3}", "encoder.ln", "heads.head". Pre-norm blocks; the attention softmax, the norms and
// the head run in FP32 (the family's default FP32 islands), the GEMMs of the encoder in the compute dtype.
#pragma once

#include <string>
#include <vector>

#include "models/family.h"
#include "models/model.h"
#include "models/recompute.h"
#include "precision/policy.h"

namespace mpt::models {

struct VitConfig {
  int64_t image_size = 224;
  int64_t patch_size = 16;
  int64_t channels = 3;
  int64_t layers = 12;
  int64_t heads = 12;
  int64_t hidden = 768;
  int64_t mlp = 3072;
  int64_t num_classes = 1000;
  double dropout = 0.0;  // after the embedding, the attention and each MLP layer, and on the attention probabilities
  double layer_norm_eps = 1e-6;
  Recompute recompute = Recompute::kNone;
};

// vit-tiny (L12 H192 h3), vit-small (L12 H384 h6), vit-b16 (L12 H768 h12), each with patch 16 and MLP 4H.
VitConfig vit_preset(const std::string& name);

class VitBlockImpl : public torch::nn::Module {
 public:
  VitBlockImpl(const VitConfig& config, const precision::ModulePolicy& policy, const std::string& prefix);
  torch::Tensor forward(const torch::Tensor& x);  // (B, S, H) -> (B, S, H)

 private:
  torch::Tensor self_attention(const torch::Tensor& normed);

  int64_t heads_;
  double dropout_;
  torch::nn::LayerNorm ln_1_{nullptr}, ln_2_{nullptr};
  torch::Tensor in_proj_weight_, in_proj_bias_;
  torch::nn::Linear out_proj_{nullptr}, mlp_in_{nullptr}, mlp_out_{nullptr};
  precision::ModuleRunner ln_1_runner_, ln_2_runner_, attention_core_runner_;
  precision::ModulePolicy policy_;
};
TORCH_MODULE(VitBlock);

class VitImpl : public ModelImpl {
 public:
  VitImpl(const VitConfig& config, const precision::ModulePolicy& policy);
  torch::Tensor forward(const torch::Tensor& inputs) override;  // (B, C, I, I) -> (B, K)
  int64_t forward_macs(const data::SampleShape& sample) const override;

 private:
  torch::Tensor embed(const torch::Tensor& images);  // (B, C, I, I) -> (B, S, H) with the class token first

  VitConfig config_;
  torch::nn::Conv2d conv_proj_{nullptr};
  torch::Tensor class_token_, pos_embedding_;
  std::vector<VitBlock> blocks_;
  torch::nn::LayerNorm ln_{nullptr};
  torch::nn::Linear head_{nullptr};
  precision::ModuleRunner ln_runner_, head_runner_;
  precision::ModulePolicy policy_;
};

// The family: model.name vit-tiny, vit-small, vit-b16, with model.patch_size; full activation checkpointing
// recomputes each encoder block.
const ModelFamily& vit_family();

}  // namespace mpt::models
