// A Llama-style decoder (Llama, SmolLM, Mistral without sliding windows) with transformers' LlamaForCausalLM module
// layout and state-dict names, so weights move between mpt and Hugging Face unchanged: "model.embed_tokens",
// "model.layers.N.{input_layernorm, self_attn.{q,k,v,o}_proj, post_attention_layernorm, mlp.{gate,up,down}_proj}",
// "model.norm", "lm_head" (absent when tied to the embeddings). RMSNorm, rotary positions, SwiGLU, grouped-query
// causal attention. The norms and the head run in FP32 (the family's default FP32 islands), the rotary embedding in
// FP32 as transformers' does, the GEMMs of the layers in the compute dtype or the run's GEMM format.
#pragma once

#include <nlohmann/json.hpp>

#include <string>
#include <utility>
#include <vector>

#include "models/family.h"
#include "models/model.h"
#include "models/recompute.h"
#include "precision/policy.h"

namespace mpt::models {

struct LlamaConfig {
  int64_t vocab_size = 49152;
  int64_t hidden = 576;
  int64_t intermediate = 1536;
  int64_t layers = 30;
  int64_t heads = 9;
  int64_t kv_heads = 3;  // grouped-query attention: each K/V head serves heads / kv_heads query heads
  int64_t head_dim = 64;
  int64_t max_positions = 2048;
  double rope_theta = 10000.0;
  double rms_norm_eps = 1e-5;
  bool tie_embeddings = true;
  // data.document_attention: a position attends only to its own document, which ends at eot_id.
  bool document_attention = false;
  int64_t eot_id = -1;
  Recompute recompute = Recompute::kNone;
};

// llama-tiny (L4 H256, 4 heads, 2 KV heads, MLP 768: a few million parameters) and llama-135m (SmolLM-135M's
// shape: L30 H576, 9 heads, 3 KV heads, MLP 1536), both with tied embeddings; the vocabulary is the data's.
LlamaConfig llama_preset(const std::string& name);

// What every layer of one forward reads besides its input: the rotary tables of the sequence length and, under
// document attention, the mask. Kept by value for a recomputation in backward.
struct DecoderContext {
  torch::Tensor cos, sin;  // FP32 (S, head_dim)
  torch::Tensor mask;      // bool (B, 1, S, S), true where attended; undefined: plain causal
};

class LlamaLayerImpl : public torch::nn::Module {
 public:
  LlamaLayerImpl(const LlamaConfig& config, const precision::ModulePolicy& policy, const std::string& prefix);
  torch::Tensor forward(const torch::Tensor& x, const DecoderContext& context);  // (B, S, H) -> (B, S, H)

 private:
  torch::Tensor self_attention(const torch::Tensor& x, const DecoderContext& context);  // the residual added
  torch::Tensor feed_forward(const torch::Tensor& x);                                   // the residual added
  // The norm's output as the projections read it, and under selective checkpointing the readers that get it
  // computed again before their backward.
  torch::Tensor normed_input(const precision::ModuleRunner& norm, const torch::Tensor& weight,
                             const torch::Tensor& x) const;
  Tensors refill_normed(const precision::ModuleRunner& norm, const torch::Tensor& weight, const torch::Tensor& x,
                        const torch::Tensor& input, const Tensors& readers) const;

  LlamaConfig config_;
  bool selective_;  // the norms' narrow copies and the SwiGLU product are let go and computed again in backward
  torch::Tensor input_norm_, post_attention_norm_;
  torch::nn::Linear q_proj_{nullptr}, k_proj_{nullptr}, v_proj_{nullptr}, o_proj_{nullptr};
  torch::nn::Linear gate_proj_{nullptr}, up_proj_{nullptr}, down_proj_{nullptr};
  precision::ModuleRunner input_norm_runner_, post_attention_norm_runner_, attention_core_runner_;
  precision::ModulePolicy policy_;
};
TORCH_MODULE(LlamaLayer);

// Causal language modelling. forward gives logits at every position (B, S, V); predict, the training path,
// computes the head only at the positions whose target is not -100.
class LlamaForCausalLmImpl : public ModelImpl {
 public:
  LlamaForCausalLmImpl(const LlamaConfig& config, const precision::ModulePolicy& policy);
  torch::Tensor forward(const torch::Tensor& inputs) override;  // (B, S) int64 -> (B, S, V)
  using ModelImpl::predict;
  Prediction predict(const torch::Tensor& inputs, const torch::Tensor& targets,
                     const torch::Tensor& target_positions) override;
  int64_t forward_macs(const data::SampleShape& sample) const override;
  std::set<std::string> tied_to_fp32_islands() const override;
  std::vector<std::pair<std::string, int64_t>> functional_gemm_dims(
      const precision::ModulePolicy& policy) const override;
  const LlamaConfig& config() const { return config_; }

 private:
  torch::Tensor decode(const torch::Tensor& ids);   // (B, S) -> final hidden states before the norm (B, S, H)
  torch::Tensor head(const torch::Tensor& hidden);  // (N, H) -> logits (N, V)
  DecoderContext context_for(const torch::Tensor& ids) const;

  LlamaConfig config_;
  torch::nn::Embedding embed_tokens_{nullptr};
  std::vector<LlamaLayer> layers_;
  torch::Tensor norm_;
  torch::nn::Linear lm_head_{nullptr};  // null when tied
  torch::Tensor inv_freq_;              // FP32 (head_dim / 2): the rotary frequencies
  precision::ModuleRunner norm_runner_, head_runner_;
  precision::ModulePolicy policy_;
};

// The family: model.name llama-tiny, llama-135m, or llama with model.hf_config; memory.activation_checkpointing full
// (each layer) and selective.
const ModelFamily& llama_family();

// The architecture in a Hugging Face config.json (model_type llama), and the config.json that rebuilds `config` as a
// LlamaForCausalLM (its eos token `eot_id`, -1 for none).
LlamaConfig read_hf_llama_config(const std::string& path);
nlohmann::ordered_json hf_llama_config(const LlamaConfig& config);

}  // namespace mpt::models
