// Llama forward. B = batch, S = sequence length, H = hidden size, h = query heads, g = key/value heads, d = head
// size, I = MLP width, V = vocabulary, N = predicted positions.
#include "models/llama.h"

#include "common/error.h"
#include "data/masking.h"
#include "models/rematerialize.h"
#include "models/transformer_blocks.h"

namespace mpt::models {
namespace {

constexpr double kInitStd = 0.02;  // transformers' initializer_range

// RMSNorm through its runner: in FP32 when the policy keeps it there (the default), else in the input's dtype.
torch::Tensor rms_norm_through(const precision::ModuleRunner& runner, const torch::Tensor& weight, double eps,
                               const torch::Tensor& x) {
  return runner(
      x, [&](const torch::Tensor& h) { return torch::rms_norm(h, {h.size(-1)}, weight.to(h.scalar_type()), eps); });
}

// The rotary embedding of x (B, heads, S, d) in FP32, as transformers computes it (its FP32 tables promote the
// compute-dtype q and k), rounded back to x's dtype for the attention.
torch::Tensor rotate(const torch::Tensor& x, const DecoderContext& context) {
  const torch::Tensor wide = x.to(torch::kFloat);
  const int64_t half = x.size(-1) / 2;
  const torch::Tensor turned = torch::cat({wide.narrow(-1, half, half).neg(), wide.narrow(-1, 0, half)}, -1);
  return (wide * context.cos + turned * context.sin).to(x.scalar_type());
}

// (B, g, S, d) -> (B, g * repeats, S, d), each key/value head repeated for the query heads it serves.
torch::Tensor repeat_heads(const torch::Tensor& x, int64_t repeats) {
  if (repeats == 1) return x;
  return x.unsqueeze(2)
      .expand({x.size(0), x.size(1), repeats, x.size(2), x.size(3)})
      .reshape({x.size(0), x.size(1) * repeats, x.size(2), x.size(3)});
}

torch::Tensor new_norm_weight(torch::nn::Module& parent, const std::string& name, int64_t hidden) {
  auto holder = parent.register_module(name, std::make_shared<torch::nn::Module>());
  return holder->register_parameter("weight", torch::ones({hidden}));
}

torch::nn::Linear projection(torch::nn::Module& parent, const std::string& name, int64_t in, int64_t out) {
  return parent.register_module(name, torch::nn::Linear(torch::nn::LinearOptions(in, out).bias(false)));
}

}  // namespace

LlamaConfig llama_preset(const std::string& name) {
  LlamaConfig config;  // llama-135m: the defaults
  if (name == "llama-tiny") {
    config.hidden = 256;
    config.intermediate = 768;
    config.layers = 4;
    config.heads = 4;
    config.kv_heads = 2;
  } else if (name != "llama-135m") {
    throw UsageError("model.name: unknown Llama size '" + name + "' (llama-tiny|135m)");
  }
  config.head_dim = config.hidden / config.heads;
  return config;
}

LlamaLayerImpl::LlamaLayerImpl(const LlamaConfig& config, const precision::ModulePolicy& policy,
                               const std::string& prefix)
    : config_(config), selective_(config.recompute == Recompute::kSelective), policy_(policy) {
  const int64_t hidden = config.hidden, d = config.head_dim;
  input_norm_ = new_norm_weight(*this, "input_layernorm", hidden);
  auto attention = register_module("self_attn", std::make_shared<torch::nn::Module>());
  q_proj_ = projection(*attention, "q_proj", hidden, config.heads * d);
  k_proj_ = projection(*attention, "k_proj", hidden, config.kv_heads * d);
  v_proj_ = projection(*attention, "v_proj", hidden, config.kv_heads * d);
  o_proj_ = projection(*attention, "o_proj", config.heads * d, hidden);
  post_attention_norm_ = new_norm_weight(*this, "post_attention_layernorm", hidden);
  auto mlp = register_module("mlp", std::make_shared<torch::nn::Module>());
  gate_proj_ = projection(*mlp, "gate_proj", hidden, config.intermediate);
  up_proj_ = projection(*mlp, "up_proj", hidden, config.intermediate);
  down_proj_ = projection(*mlp, "down_proj", config.intermediate, hidden);
  input_norm_runner_ = policy.runner(prefix + ".input_layernorm", "RMSNorm");
  post_attention_norm_runner_ = policy.runner(prefix + ".post_attention_layernorm", "RMSNorm");
  attention_core_runner_ = policy.runner(prefix + ".self_attn.core", "attention");
}

torch::Tensor LlamaLayerImpl::normed_input(const precision::ModuleRunner& norm, const torch::Tensor& weight,
                                           const torch::Tensor& x) const {
  return precision::as_projection_input(rms_norm_through(norm, weight, config_.rms_norm_eps, x));
}

Tensors LlamaLayerImpl::refill_normed(const precision::ModuleRunner& norm, const torch::Tensor& weight,
                                      const torch::Tensor& x, const torch::Tensor& input,
                                      const Tensors& readers) const {
  if (!selective_ || norm.monitor) return readers;  // a monitor would count the norm twice
  // The norm's output is computed again from x, which the norm's backward keeps.
  return refill_in_backward(
      input,
      [norm, weight, eps = config_.rms_norm_eps, x] {
        return precision::as_projection_input(rms_norm_through(norm, weight, eps, x));
      },
      readers);
}

torch::Tensor LlamaLayerImpl::forward(const torch::Tensor& x, const DecoderContext& context) {
  return feed_forward(self_attention(x, context));
}

torch::Tensor LlamaLayerImpl::self_attention(const torch::Tensor& x, const DecoderContext& context) {
  const torch::Tensor input = normed_input(input_norm_runner_, input_norm_, x);
  const Tensors qkv =
      refill_normed(input_norm_runner_, input_norm_, x, input,
                    {policy_.linear(input, q_proj_->weight, {}), policy_.linear(input, k_proj_->weight, {}),
                     policy_.linear(input, v_proj_->weight, {})});
  const int64_t repeats = config_.heads / config_.kv_heads;
  const torch::Tensor q = rotate(split_heads(qkv[0], config_.heads), context);  // (B, h, S, d)
  const torch::Tensor k = repeat_heads(rotate(split_heads(qkv[1], config_.kv_heads), context), repeats);
  const torch::Tensor v = repeat_heads(split_heads(qkv[2], config_.kv_heads), repeats);  // (B, h, S, d)
  // The fused kernel keeps the scores and the softmax in FP32 whatever the dtype of q and k.
  const torch::Tensor attended = attention_core_runner_({q, k, v}, [&](const Tensors& qkv_heads) {
    return at::scaled_dot_product_attention(
        qkv_heads[0], qkv_heads[1], qkv_heads[2],
        context.mask.defined() ? std::optional<torch::Tensor>(context.mask) : std::nullopt, 0.0,
        /*is_causal=*/!context.mask.defined());
  });
  return x + policy_.linear(merge_heads(attended), o_proj_->weight, {});  // (B, S, H)
}

torch::Tensor LlamaLayerImpl::feed_forward(const torch::Tensor& x) {
  const torch::Tensor input = normed_input(post_attention_norm_runner_, post_attention_norm_, x);
  const Tensors gate_up =
      refill_normed(post_attention_norm_runner_, post_attention_norm_, x, input,
                    {policy_.linear(input, gate_proj_->weight, {}), policy_.linear(input, up_proj_->weight, {})});
  const torch::Tensor &gate = gate_up[0], &up = gate_up[1];
  const torch::Tensor activated = torch::silu(gate) * up;  // (B, S, I)
  torch::Tensor down = policy_.linear(activated, down_proj_->weight, {});
  if (selective_) down = refill_in_backward(activated, [gate, up] { return torch::silu(gate) * up; }, {down})[0];
  return x + down;
}

LlamaForCausalLmImpl::LlamaForCausalLmImpl(const LlamaConfig& config, const precision::ModulePolicy& policy)
    : config_(config), policy_(policy) {
  MPT_CHECK(config.heads % config.kv_heads == 0, "Llama's query heads must be a multiple of its key/value heads");
  MPT_CHECK(config.head_dim % 2 == 0, "Llama's head size must be even (rotary pairs)");
  auto model = register_module("model", std::make_shared<torch::nn::Module>());
  embed_tokens_ = model->register_module("embed_tokens", torch::nn::Embedding(config.vocab_size, config.hidden));
  auto layers = model->register_module("layers", torch::nn::ModuleList());
  for (int64_t i = 0; i < config.layers; ++i) {
    layers_.push_back(LlamaLayer(config, policy, "model.layers." + std::to_string(i)));
    layers->push_back(layers_.back());
  }
  norm_ = new_norm_weight(*model, "norm", config.hidden);
  if (!config.tie_embeddings) lm_head_ = projection(*this, "lm_head", config.hidden, config.vocab_size);
  // Tied: the lookup's gradient touches only the rows in the batch; sparse, autograd adds it in place into the
  // head's dense gradient of the same matrix (as BERT's MLM decoder does).
  if (config.tie_embeddings) embed_tokens_->options.sparse(true);
  norm_runner_ = policy.runner("model.norm", "RMSNorm");
  head_runner_ = policy.runner("lm_head", config.tie_embeddings ? "tied Linear" : "");
  inv_freq_ = 1.0 / torch::pow(config.rope_theta, torch::arange(0, config.head_dim, 2, torch::kLong).to(torch::kFloat) /
                                                      static_cast<double>(config.head_dim));
  torch::NoGradGuard no_grad;
  for (auto& module : modules(/*include_self=*/false)) {
    if (auto* linear = module->as<torch::nn::Linear>()) linear->weight.normal_(0.0, kInitStd);
    if (auto* embedding = module->as<torch::nn::Embedding>()) embedding->weight.normal_(0.0, kInitStd);
  }
}

DecoderContext LlamaForCausalLmImpl::context_for(const torch::Tensor& ids) const {
  const torch::Tensor positions = torch::arange(ids.size(1), torch::TensorOptions(torch::kFloat).device(ids.device()));
  const torch::Tensor freqs = torch::outer(positions, inv_freq_.to(ids.device()));  // (S, d / 2)
  const torch::Tensor angles = torch::cat({freqs, freqs}, -1);                      // (S, d)
  DecoderContext context{angles.cos(), angles.sin(), torch::Tensor()};
  if (config_.document_attention && config_.eot_id >= 0) {
    // Each end-of-text token closes its document: positions attend to earlier ones of the same document.
    const torch::Tensor ends = ids.eq(config_.eot_id);
    const torch::Tensor document = ends.cumsum(1) - ends.to(torch::kLong);  // (B, S)
    const torch::Tensor same = document.unsqueeze(2).eq(document.unsqueeze(1));
    context.mask = same.logical_and(torch::ones({ids.size(1), ids.size(1)}, ends.options()).tril()).unsqueeze(1);
  }
  return context;
}

torch::Tensor LlamaForCausalLmImpl::decode(const torch::Tensor& ids) {
  MPT_CHECK(ids.dim() == 2, "Llama takes token ids of shape (batch, sequence)");
  MPT_CHECK(ids.size(1) <= config_.max_positions, "the sequence is longer than Llama's max_position_embeddings");
  const DecoderContext context = context_for(ids);
  torch::Tensor x = embed_tokens_->forward(ids);  // (B, S, H), the FP32 residual stream
  for (auto& layer : layers_) x = through_block(*layer, x, config_.recompute, policy_, context);
  return x;
}

torch::Tensor LlamaForCausalLmImpl::head(const torch::Tensor& hidden) {
  const torch::Tensor normed = rms_norm_through(norm_runner_, norm_, config_.rms_norm_eps, hidden);
  return head_runner_(normed, [&](const torch::Tensor& h) {
    const torch::Tensor input = precision::as_projection_input(h);  // the norm may be an island the head is not
    if (lm_head_) return policy_.linear(input, lm_head_->weight, {});
    return tied_decoder(input, embed_tokens_->weight.to(input.scalar_type()));
  });
}

torch::Tensor LlamaForCausalLmImpl::forward(const torch::Tensor& inputs) {
  const torch::Tensor hidden = decode(inputs);
  return head(hidden.reshape({-1, config_.hidden})).view({inputs.size(0), inputs.size(1), -1});  // (B, S, V)
}

Prediction LlamaForCausalLmImpl::predict(const torch::Tensor& inputs, const torch::Tensor& targets,
                                         const torch::Tensor& target_positions) {
  const torch::Tensor hidden = decode(inputs).reshape({-1, config_.hidden});  // (B * S, H)
  const torch::Tensor flat_targets = targets.reshape({-1});
  const torch::Tensor positions = target_positions.defined() ? target_positions : data::target_positions(targets);
  if (positions.size(0) == flat_targets.size(0)) return {head(hidden), flat_targets};         // every position predicts
  return {head(hidden.index_select(0, positions)), flat_targets.index_select(0, positions)};  // (N, V), (N)
}

int64_t LlamaForCausalLmImpl::forward_macs(const data::SampleShape& sample) const {
  const LlamaConfig& c = config_;
  const int64_t s = sample.seq_len, attention_width = c.heads * c.head_dim;
  const int64_t projections = c.hidden * (2 * attention_width + 2 * c.kv_heads * c.head_dim);
  const int64_t causal_products = s * attention_width;  // q k^T and p v over the S / 2 keys a position sees on average
  const int64_t layer = projections + 3 * c.hidden * c.intermediate + causal_products;
  return s * (c.layers * layer + c.hidden * c.vocab_size);
}

std::set<std::string> LlamaForCausalLmImpl::tied_to_fp32_islands() const {
  if (lm_head_ || !policy_.runs_in_fp32("lm_head")) return {};
  return {"model.embed_tokens.weight"};
}

std::vector<std::pair<std::string, int64_t>> LlamaForCausalLmImpl::functional_gemm_dims(
    const precision::ModulePolicy& policy) const {
  if (lm_head_ || policy.runs_in_fp32("lm_head")) return {};
  return {{"lm_head (tied to the embeddings: the vocabulary)", config_.vocab_size}};
}

}  // namespace mpt::models
