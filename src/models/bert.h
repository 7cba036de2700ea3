// BERT (Devlin et al.) with Hugging Face's module layout and state-dict names, so weights move between mpt and
// transformers users unchanged: BertModel ("embeddings.*", "encoder.layer.N.*", "pooler.dense.*"), and the two
// training heads BertForMaskedLM ("bert.*" without pooler, "cls.predictions.*", decoder tied to the word
// embeddings) and BertForSequenceClassification ("bert.*", "classifier.*").
// Precision: the attention softmax runs in FP32 always; LayerNorms and the heads run through the policy
// (FP32 by default), so only the GEMMs of the encoder compute in BF16/FP16.
#pragma once

#include <string>
#include <utility>
#include <vector>

#include "models/family.h"
#include "models/model.h"
#include "models/recompute.h"
#include "models/rematerialize.h"
#include "precision/policy.h"

namespace mpt::models {

struct BertConfig {
  int64_t vocab_size = 30522;
  int64_t hidden = 768;
  int64_t layers = 12;
  int64_t heads = 12;
  int64_t intermediate = 3072;
  int64_t max_positions = 512;
  int64_t type_vocab = 2;
  double layer_norm_eps = 1e-12;
  double dropout = 0.1;                    // hidden states and attention probabilities (HF's two dropouts)
  std::string head = "mlm";                // mlm | classification
  int64_t num_classes = 2;                 // classification
  int64_t pad_id = 0;                      // attention ignores [PAD] positions
  Recompute recompute = Recompute::kNone;  // memory.activation_checkpointing: what backward recomputes
};

// Google's BERT sizes: tiny (L2 H128), mini (L4 H256), small (L4 H512), medium (L8 H512), base (L12 H768),
// large (L24 H1024); heads = H / 64, intermediate = 4H. `name` is "bert-<size>".
BertConfig bert_preset(const std::string& name);

// A holder module that only gives its children a name ("attention", "output", "cls"), as HF's nesting does.
class NamedScopeImpl : public torch::nn::Module {};
TORCH_MODULE(NamedScope);

class BertEmbeddingsImpl : public torch::nn::Module {
 public:
  BertEmbeddingsImpl(const BertConfig& config, const precision::ModulePolicy& policy, const std::string& prefix);
  torch::Tensor forward(const torch::Tensor& ids);  // (B, S) int64 -> (B, S, H)
  torch::nn::Embedding word_embeddings{nullptr};

 private:
  torch::nn::Embedding position_embeddings_{nullptr}, token_type_embeddings_{nullptr};
  torch::nn::LayerNorm norm_{nullptr};
  precision::ModuleRunner norm_runner_;
  double dropout_;
};
TORCH_MODULE(BertEmbeddings);

// Hidden states between encoder layers: the residual stream (FP32 unless the policy runs the norms in the compute
// dtype) and, when defined, the same values as the next layer's projections read them (BF16 under autocast),
// written by the LayerNorm that ends the layer.
struct Hidden {
  Hidden(torch::Tensor states_in, torch::Tensor for_projection_in, Recomputation narrow_again_in = nullptr)
      : states(std::move(states_in)),
        for_projection(std::move(for_projection_in)),
        narrow_again(std::move(narrow_again_in)) {}
  torch::Tensor states;          // (B, S, H)
  torch::Tensor for_projection;  // (B, S, H) or undefined
  Recomputation narrow_again;    // selective: for_projection from the norm's input, when it is a copy of its own
};

class BertLayerImpl : public torch::nn::Module {
 public:
  BertLayerImpl(const BertConfig& config, const precision::ModulePolicy& policy, const std::string& prefix);
  // x (B, S, H); mask_bias (B, 1, 1, S) FP32: 0 where attended, a large negative number at [PAD].
  torch::Tensor forward(const torch::Tensor& x, const torch::Tensor& mask_bias);
  // The same, between layers: `next_has_projection` asks for the output's for_projection copy too.
  Hidden forward(const Hidden& x, const torch::Tensor& mask_bias, bool next_has_projection);

 private:
  // x + dropout(attention output projection of the attention), the attention norm's input: (B, S, H).
  torch::Tensor self_attention(const Hidden& x, const torch::Tensor& mask_bias);
  // The attention norm's output + dropout(W2 gelu(W1 x)), the output norm's input: (B, S, H).
  torch::Tensor feed_forward(const Hidden& attended);

  int64_t heads_;
  double dropout_;
  // selective: the attention core runs again in backward, and the norms' narrow copies and the GELU's output that
  // the projections save are let go and computed again just before their backward.
  bool selective_;
  torch::nn::Linear query_{nullptr}, key_{nullptr}, value_{nullptr}, attention_out_{nullptr};
  torch::nn::Linear intermediate_{nullptr}, output_{nullptr};
  torch::nn::LayerNorm attention_norm_{nullptr}, output_norm_{nullptr};
  precision::ModuleRunner attention_norm_runner_, output_norm_runner_, attention_core_runner_;
  precision::ModulePolicy policy_;  // its GEMM route: the projections' FP8 layers
};
TORCH_MODULE(BertLayer);

// The encoder stack; with_pooler adds "pooler.dense" (tanh over the [CLS] state) for classification.
class BertModelImpl : public torch::nn::Module {
 public:
  BertModelImpl(const BertConfig& config, bool with_pooler, const precision::ModulePolicy& policy,
                const std::string& prefix);
  torch::Tensor forward(const torch::Tensor& ids);  // (B, S) -> hidden states (B, S, H)
  torch::Tensor pool(const torch::Tensor& hidden);  // (B, S, H) -> (B, H)
  BertEmbeddings embeddings{nullptr};

 private:
  BertConfig config_;
  std::vector<BertLayer> layers_;
  torch::nn::Linear pooler_{nullptr};
  precision::ModulePolicy policy_;
};
TORCH_MODULE(BertModel);

// Masked-LM pre-training. forward gives logits at every position (B, S, V); predict, the training path,
// computes the head only at the positions whose target is not -100.
class BertForMaskedLmImpl : public ModelImpl {
 public:
  BertForMaskedLmImpl(const BertConfig& config, const precision::ModulePolicy& policy);
  torch::Tensor forward(const torch::Tensor& inputs) override;
  using ModelImpl::predict;
  Prediction predict(const torch::Tensor& inputs, const torch::Tensor& targets,
                     const torch::Tensor& target_positions) override;
  int64_t forward_macs(const data::SampleShape& sample) const override;
  std::set<std::string> tied_to_fp32_islands() const override;
  std::vector<std::pair<std::string, int64_t>> functional_gemm_dims(
      const precision::ModulePolicy& policy) const override;

 private:
  torch::Tensor head(const torch::Tensor& hidden);  // (N, H) -> (N, V)

  BertConfig config_;
  BertModel bert_{nullptr};
  torch::nn::Linear transform_{nullptr};
  torch::nn::LayerNorm transform_norm_{nullptr};
  torch::Tensor decoder_bias_;
  precision::ModuleRunner head_runner_, transform_norm_runner_, decoder_runner_;
  bool head_in_fp32_;  // the decoder runs in an FP32 island (the default policy's "cls.predictions")
  precision::ModulePolicy policy_;
};

class BertForSequenceClassificationImpl : public ModelImpl {
 public:
  BertForSequenceClassificationImpl(const BertConfig& config, const precision::ModulePolicy& policy);
  torch::Tensor forward(const torch::Tensor& inputs) override;  // (B, S) -> (B, K)
  int64_t forward_macs(const data::SampleShape& sample) const override;

 private:
  BertConfig config_;
  BertModel bert_{nullptr};
  torch::nn::Linear classifier_{nullptr};
  precision::ModuleRunner classifier_runner_;
};

// MACs of the encoder for one sequence of `seq_len` tokens (projections, attention products, feed-forward).
int64_t bert_encoder_macs(const BertConfig& config, int64_t seq_len);

// The family: model.name bert-tiny .. bert-large, or bert with model.hf_config; model.heads and model.head.
const ModelFamily& bert_family();

// The BERT architecture `config` names (a preset with its head count, or a config.json), with the spec's
// dropout and head; vocabulary and classes are the data's, filled in when the model is built.
BertConfig bert_architecture(const ModelConfig& config);

}  // namespace mpt::models
