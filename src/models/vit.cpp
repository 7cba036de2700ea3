// ViT forward and the family's descriptor. B = batch, C = channels, I = image size, P = patch size, S = patches + 1
// (the class token), H = hidden size, h = heads, K = classes.
#include "models/vit.h"

#include <cmath>

#include "common/error.h"
#include "models/transformer_blocks.h"
#include "ops/dropout.h"
#include "ops/gelu.h"

namespace mpt::models {
namespace {

torch::nn::LayerNorm layer_norm(const VitConfig& config) {
  return torch::nn::LayerNorm(torch::nn::LayerNormOptions({config.hidden}).eps(config.layer_norm_eps));
}

torch::Tensor maybe_dropout(const torch::Tensor& x, double p, bool training) {
  return p > 0 ? ops::dropout(x, p, training) : x;
}

// torchvision's initialisation: Xavier-uniform projections, the MLP's biases N(0, 1e-6), the patch embedding
// truncated-normal with std sqrt(1 / fan_in), positions N(0, 0.02), the class token and the head zero.
void init_block(torch::Tensor& in_proj_weight, torch::Tensor& in_proj_bias, torch::nn::Linear& out_proj,
                torch::nn::Linear& mlp_in, torch::nn::Linear& mlp_out) {
  torch::NoGradGuard no_grad;
  torch::nn::init::xavier_uniform_(in_proj_weight);
  in_proj_bias.zero_();
  out_proj->bias.zero_();
  for (auto* linear : {&mlp_in, &mlp_out}) {
    torch::nn::init::xavier_uniform_((*linear)->weight);
    (*linear)->bias.normal_(0.0, 1e-6);
  }
}

}  // namespace

VitConfig vit_preset(const std::string& name) {
  struct Size {
    const char* name;
    int64_t hidden, heads;
  };
  static const Size sizes[] = {{"vit-tiny", 192, 3}, {"vit-small", 384, 6}, {"vit-b16", 768, 12}};
  for (const Size& size : sizes) {
    if (name != size.name) continue;
    VitConfig config;
    config.hidden = size.hidden;
    config.heads = size.heads;
    config.mlp = 4 * size.hidden;
    return config;
  }
  throw UsageError("model.name: unknown ViT size '" + name + "' (vit-tiny|small|b16)");
}

VitBlockImpl::VitBlockImpl(const VitConfig& config, const precision::ModulePolicy& policy, const std::string& prefix)
    : heads_(config.heads), dropout_(config.dropout), policy_(policy) {
  const int64_t hidden = config.hidden;
  ln_1_ = register_module("ln_1", layer_norm(config));
  auto attention = register_module("self_attention", std::make_shared<torch::nn::Module>());
  in_proj_weight_ = attention->register_parameter("in_proj_weight", torch::empty({3 * hidden, hidden}));
  in_proj_bias_ = attention->register_parameter("in_proj_bias", torch::empty({3 * hidden}));
  out_proj_ = attention->register_module("out_proj", torch::nn::Linear(hidden, hidden));
  ln_2_ = register_module("ln_2", layer_norm(config));
  auto mlp = register_module("mlp", std::make_shared<torch::nn::Module>());
  mlp_in_ = mlp->register_module("0", torch::nn::Linear(hidden, config.mlp));
  mlp_out_ = mlp->register_module("3", torch::nn::Linear(config.mlp, hidden));
  ln_1_runner_ = policy.runner(prefix + ".ln_1");
  ln_2_runner_ = policy.runner(prefix + ".ln_2");
  attention_core_runner_ = policy.runner(prefix + ".self_attention.core", "attention");
  init_block(in_proj_weight_, in_proj_bias_, out_proj_, mlp_in_, mlp_out_);
}

torch::Tensor VitBlockImpl::self_attention(const torch::Tensor& normed) {
  const torch::Tensor qkv = policy_.linear(precision::as_projection_input(normed), in_proj_weight_, in_proj_bias_);
  const std::vector<torch::Tensor> parts = qkv.chunk(3, -1);  // (B, S, H) each
  const torch::Tensor no_mask =
      torch::zeros({normed.size(0), 1, 1, normed.size(1)}, normed.options().dtype(torch::kFloat));
  const torch::Tensor context = attention_core_runner_(
      {split_heads(parts[0], heads_), split_heads(parts[1], heads_), split_heads(parts[2], heads_)},
      [&](const Tensors& qkv) {
        return attention_core(qkv[0], qkv[1], qkv[2], no_mask, dropout_, is_training(), Scores::kFp32);
      });
  return policy_.linear(merge_heads(context), out_proj_->weight, out_proj_->bias);  // (B, S, H)
}

torch::Tensor VitBlockImpl::forward(const torch::Tensor& x) {
  const torch::Tensor attended =
      ops::dropout_add(self_attention(layer_norm_through(ln_1_runner_, ln_1_, x)), x, dropout_, is_training());
  const torch::Tensor normed = precision::as_projection_input(layer_norm_through(ln_2_runner_, ln_2_, attended));
  const torch::Tensor up =
      maybe_dropout(ops::gelu(policy_.linear(normed, mlp_in_->weight, mlp_in_->bias)), dropout_, is_training());
  return ops::dropout_add(policy_.linear(up, mlp_out_->weight, mlp_out_->bias), attended, dropout_, is_training());
}

VitImpl::VitImpl(const VitConfig& config, const precision::ModulePolicy& policy) : config_(config), policy_(policy) {
  MPT_CHECK(config.hidden % config.heads == 0, "ViT hidden size must be a multiple of the head count");
  const int64_t grid = config.image_size / config.patch_size;
  conv_proj_ = register_module(
      "conv_proj",
      torch::nn::Conv2d(
          torch::nn::Conv2dOptions(config.channels, config.hidden, config.patch_size).stride(config.patch_size)));
  class_token_ = register_parameter("class_token", torch::zeros({1, 1, config.hidden}));
  auto encoder = register_module("encoder", std::make_shared<torch::nn::Module>());
  pos_embedding_ = encoder->register_parameter("pos_embedding", torch::empty({1, grid * grid + 1, config.hidden}));
  auto layers = encoder->register_module("layers", std::make_shared<torch::nn::Module>());
  for (int64_t i = 0; i < config.layers; ++i) {
    const std::string name = "encoder_layer_" + std::to_string(i);
    blocks_.push_back(layers->register_module(name, VitBlock(config, policy, "encoder.layers." + name)));
  }
  ln_ = encoder->register_module("ln", layer_norm(config));
  auto heads = register_module("heads", std::make_shared<torch::nn::Module>());
  head_ = heads->register_module("head", torch::nn::Linear(config.hidden, config.num_classes));
  ln_runner_ = policy.runner("encoder.ln");
  head_runner_ = policy.runner("heads");
  torch::NoGradGuard no_grad;
  const double fan_in = static_cast<double>(config.channels * config.patch_size * config.patch_size);
  // torch's trunc_normal_ cuts at +-2 absolute, 2/std standard deviations out here: a cut it (almost) never makes.
  conv_proj_->weight.normal_(0.0, std::sqrt(1.0 / fan_in)).clamp_(-2.0, 2.0);
  conv_proj_->bias.zero_();
  pos_embedding_.normal_(0.0, 0.02);
  head_->weight.zero_();
  head_->bias.zero_();
}

torch::Tensor VitImpl::embed(const torch::Tensor& images) {
  const torch::Tensor patches = conv_proj_->forward(images).flatten(2).transpose(1, 2);  // (B, S - 1, H)
  // The residual stream is FP32, whatever dtype the patch embedding computed in.
  const torch::Tensor tokens = torch::cat(
      {class_token_.to(torch::kFloat).expand({images.size(0), 1, config_.hidden}), patches.to(torch::kFloat)}, 1);
  return maybe_dropout(tokens + pos_embedding_.to(torch::kFloat), config_.dropout, is_training());  // (B, S, H)
}

torch::Tensor VitImpl::forward(const torch::Tensor& inputs) {
  MPT_CHECK(inputs.dim() == 4 && inputs.size(2) == config_.image_size && inputs.size(3) == config_.image_size,
            "ViT takes images of its configured size");
  torch::Tensor x = embed(inputs);
  for (auto& block : blocks_) x = through_block(*block, x, config_.recompute, policy_);
  const torch::Tensor first = layer_norm_through(ln_runner_, ln_, x).select(1, 0);  // the class token: (B, H)
  return head_runner_(first, [&](const torch::Tensor& h) { return policy_.linear(h, head_->weight, head_->bias); });
}

int64_t VitImpl::forward_macs(const data::SampleShape&) const {
  const VitConfig& c = config_;
  const int64_t patches = (c.image_size / c.patch_size) * (c.image_size / c.patch_size), tokens = patches + 1;
  const int64_t embedding = patches * c.hidden * c.channels * c.patch_size * c.patch_size;
  const int64_t block =
      4 * c.hidden * c.hidden * tokens + 2 * tokens * tokens * c.hidden + 2 * c.hidden * c.mlp * tokens;
  return embedding + c.layers * block + c.hidden * c.num_classes;
}

namespace {

// The spec keys only ViT reads.
struct VitOptions {
  int64_t patch_size = 0;
};

const keys::OptionTable<VitOptions>& vit_options() {
  static const keys::OptionTable<VitOptions> table = [] {
    keys::OptionTable<VitOptions> options;
    options
        .add("model.patch_size", &VitOptions::patch_size,
             "ViT: patch side in pixels, dividing the image size (0 = the preset's 16; 4 or 7 for 28 px "
             "Fashion-MNIST).")
        .between(0, 1024);
    return options;
  }();
  return table;
}

Model build_vit(const ModelConfig& model, const MemoryConfig& memory, const data::SampleShape& sample,
                const precision::ModulePolicy& policy) {
  VitConfig config = vit_preset(model.name);
  if (const int64_t patch = vit_options().read(model.options).patch_size; patch > 0) config.patch_size = patch;
  if (sample.height != sample.width)
    throw UsageError("model.name: " + model.name + " takes square images; the data's are " +
                     std::to_string(sample.height) + " x " + std::to_string(sample.width) + " (set data.image_size)");
  if (sample.height % config.patch_size != 0)
    throw UsageError("model.patch_size = " + std::to_string(config.patch_size) + " does not divide the image size " +
                     std::to_string(sample.height) + " (set model.patch_size or data.image_size)");
  config.image_size = sample.height;
  config.channels = sample.channels;
  config.num_classes = sample.num_classes;
  config.dropout = model.dropout;
  config.recompute = memory.activation_checkpointing;
  return std::make_shared<VitImpl>(config, policy);
}

}  // namespace

const ModelFamily& vit_family() {
  static const ModelFamily family{"vit",
                                  "ViT",
                                  data::Modality::kImages,
                                  {"vit-tiny", "vit-small", "vit-b16"},
                                  vit_options().keys(),
                                  /*takes_dropout=*/true,
                                  /*fp32_modules=*/{"heads", "*.ln_1", "*.ln_2", "encoder.ln"},
                                  {Recompute::kNone, Recompute::kFull},
                                  build_vit,
                                  nullptr,
                                  /*hf_base_prefix=*/"",
                                  /*hf_config=*/nullptr};
  return family;
}

}  // namespace mpt::models
