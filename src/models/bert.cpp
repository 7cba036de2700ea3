// BERT forward. B = batch, S = sequence length, H = hidden size, h = heads, d = H / h, V = vocabulary,
// M = masked positions, K = classes.
#include "models/bert.h"

#include <cmath>

#include "common/error.h"
#include "data/masking.h"
#include "ops/dropout.h"
#include "ops/gelu.h"
#include "ops/layer_norm.h"
#include "models/transformer_blocks.h"

namespace mpt::models {
namespace {

constexpr double kInitStd = 0.02;      // HF's initializer_range
constexpr double kMaskedScore = -1e9;  // added to [PAD] keys' scores; exp() of it is 0 in FP32

torch::nn::LayerNorm layer_norm(const BertConfig& config) {
  return torch::nn::LayerNorm(torch::nn::LayerNormOptions({config.hidden}).eps(config.layer_norm_eps));
}

torch::Tensor maybe_dropout(const torch::Tensor& x, double p, bool training) {
  return p > 0 ? ops::dropout(x, p, training) : x;
}

// x W^T + b through ATen's linear. The C++ frontend's Linear::forward splits a 3-D input into matmul and `+=
// bias`, so autocast casts only the matmul's operands and the in-place add of the FP32 bias widens the whole
// BF16 output to FP32 and narrows it back (two extra passes over every projection's output). at::linear is one
// op to autocast: the bias is cast with the weight and the add stays in the compute dtype. Under precision.mode
// fp8 the policy routes the layer's GEMM to the run's FP8 format.
torch::Tensor project(const precision::ModulePolicy& policy, const torch::nn::Linear& layer, const torch::Tensor& x) {
  return policy.linear(x, layer->weight, layer->bias);
}

// A layer's closing LayerNorm through its runner, with its output also as the next projections read it
// (precision::as_projection_input) when `for_projection`. When the norm is an FP32 island and the projections
// compute in BF16 (the default policy of a mixed run), one pass writes both (ops::layer_norm_and_narrow) and its
// backward takes both paths' gradients; unfused, that is a cast forward, a cast and an add back.
Hidden norm_outputs(const precision::ModuleRunner& runner, const torch::nn::LayerNorm& norm, const torch::Tensor& x,
                    bool for_projection) {
  const torch::DeviceType device = x.device().type();
  if (for_projection && runner.keep_fp32 && !runner.monitor && x.scalar_type() == torch::kFloat &&
      precision::projection_dtype(device) == torch::kBFloat16) {
    precision::Fp32Scope fp32(device);
    ops::NormOutput out = ops::layer_norm_and_narrow(x, *norm, torch::kBFloat16);
    return {out.fp32, out.narrow};
  }
  const torch::Tensor y = layer_norm_through(runner, norm, x);
  return {y, for_projection ? precision::as_projection_input(y) : torch::Tensor()};
}

// norm_outputs(), and under selective checkpointing how to compute the narrow copy again from the norm's input,
// which its backward keeps. Not under a numerics monitor, which would count the norm twice.
Hidden norm_for_next(const precision::ModuleRunner& runner, const torch::nn::LayerNorm& norm, const torch::Tensor& x,
                     bool for_projection, bool selective) {
  Hidden out = norm_outputs(runner, norm, x, for_projection);
  if (selective && out.for_projection.defined() && !out.for_projection.is_alias_of(out.states) && !runner.monitor)
    out.narrow_again = [runner, norm, x] { return norm_outputs(runner, norm, x, true).for_projection; };
  return out;
}

// `like` computed again as `states` cast to its dtype.
Recomputation cast_again(const torch::Tensor& states, const torch::Tensor& like) {
  return [states, dtype = like.scalar_type()] { return states.to(dtype); };
}

// HF's _init_weights: N(0, 0.02) for linear and embedding weights, zero biases and the [PAD] embedding row.
void init_weights(torch::nn::Module& root, int64_t pad_id) {
  torch::NoGradGuard no_grad;
  for (auto& module : root.modules(/*include_self=*/false)) {
    if (auto* linear = module->as<torch::nn::Linear>()) {
      linear->weight.normal_(0.0, kInitStd);
      if (linear->bias.defined()) linear->bias.zero_();
    } else if (auto* embedding = module->as<torch::nn::Embedding>()) {
      embedding->weight.normal_(0.0, kInitStd);
      if (embedding->options.padding_idx()) embedding->weight[pad_id].zero_();
    }
  }
}

}  // namespace

BertConfig bert_preset(const std::string& name) {
  struct Size {
    const char* name;
    int64_t layers, hidden;
  };
  static const Size sizes[] = {{"bert-tiny", 2, 128},   {"bert-mini", 4, 256},  {"bert-small", 4, 512},
                               {"bert-medium", 8, 512}, {"bert-base", 12, 768}, {"bert-large", 24, 1024}};
  for (const Size& size : sizes) {
    if (name != size.name) continue;
    BertConfig config;
    config.layers = size.layers;
    config.hidden = size.hidden;
    config.heads = size.hidden / 64;
    config.intermediate = 4 * size.hidden;
    return config;
  }
  throw UsageError("model.name: unknown BERT size '" + name + "' (bert-tiny|mini|small|medium|base|large)");
}

BertEmbeddingsImpl::BertEmbeddingsImpl(const BertConfig& config, const precision::ModulePolicy& policy,
                                       const std::string& prefix)
    : dropout_(config.dropout) {
  word_embeddings = register_module(
      "word_embeddings",
      torch::nn::Embedding(torch::nn::EmbeddingOptions(config.vocab_size, config.hidden).padding_idx(config.pad_id)));
  position_embeddings_ =
      register_module("position_embeddings", torch::nn::Embedding(config.max_positions, config.hidden));
  token_type_embeddings_ =
      register_module("token_type_embeddings", torch::nn::Embedding(config.type_vocab, config.hidden));
  norm_ = register_module("LayerNorm", layer_norm(config));
  norm_runner_ = policy.runner(prefix + ".LayerNorm");
}

torch::Tensor BertEmbeddingsImpl::forward(const torch::Tensor& ids) {
  // Positions are 0..S-1, so their embeddings are the table's first S rows: a view, not a lookup (index_select on a
  // BF16 table under master_weights was slow even for these few rows; docs/findings.md).
  const torch::Tensor positions = position_embeddings_->weight.narrow(0, 0, ids.size(1));  // (S, H)
  // One segment: every token has type 0, so its embedding is row 0 broadcast over the batch.
  torch::Tensor x = word_embeddings->forward(ids) + positions + token_type_embeddings_->weight[0];  // (B, S, H)
  x = layer_norm_through(norm_runner_, norm_, x);
  return maybe_dropout(x, dropout_, is_training());
}

BertLayerImpl::BertLayerImpl(const BertConfig& config, const precision::ModulePolicy& policy, const std::string& prefix)
    : heads_(config.heads),
      dropout_(config.dropout),
      selective_(config.recompute == Recompute::kSelective),
      policy_(policy) {
  MPT_CHECK(config.hidden % config.heads == 0, "BERT hidden size must be a multiple of the head count");
  const int64_t hidden = config.hidden;
  auto attention = register_module("attention", NamedScope());
  auto self = attention->register_module("self", NamedScope());
  query_ = self->register_module("query", torch::nn::Linear(hidden, hidden));
  key_ = self->register_module("key", torch::nn::Linear(hidden, hidden));
  value_ = self->register_module("value", torch::nn::Linear(hidden, hidden));
  auto attention_output = attention->register_module("output", NamedScope());
  attention_out_ = attention_output->register_module("dense", torch::nn::Linear(hidden, hidden));
  attention_norm_ = attention_output->register_module("LayerNorm", layer_norm(config));
  attention_norm_runner_ = policy.runner(prefix + ".attention.output.LayerNorm");
  attention_core_runner_ = policy.runner(prefix + ".attention.self.core", "attention");
  auto intermediate = register_module("intermediate", NamedScope());
  intermediate_ = intermediate->register_module("dense", torch::nn::Linear(hidden, config.intermediate));
  auto output = register_module("output", NamedScope());
  output_ = output->register_module("dense", torch::nn::Linear(config.intermediate, hidden));
  output_norm_ = output->register_module("LayerNorm", layer_norm(config));
  output_norm_runner_ = policy.runner(prefix + ".output.LayerNorm");
}

torch::Tensor BertLayerImpl::forward(const torch::Tensor& x, const torch::Tensor& mask_bias) {
  return forward(Hidden{x, torch::Tensor()}, mask_bias, /*next_has_projection=*/false).states;
}

Hidden BertLayerImpl::forward(const Hidden& hidden_states, const torch::Tensor& mask_bias, bool next_has_projection) {
  const Hidden attended =
      norm_for_next(attention_norm_runner_, attention_norm_, self_attention(hidden_states, mask_bias),
                    /*for_projection=*/true, selective_);
  return norm_for_next(output_norm_runner_, output_norm_, feed_forward(attended), next_has_projection, selective_);
}

torch::Tensor BertLayerImpl::self_attention(const Hidden& hidden_states, const torch::Tensor& mask_bias) {
  const torch::Tensor& x = hidden_states.states;
  // Q, K and V read the same FP32 input; under autocast each projection would cast it on its own (three casts
  // forward, three back and an FP32 sum of their gradients). Cast once: backward sums the three BF16/FP16
  // gradients in that dtype, one more rounding of values that each GEMM has already rounded to it.
  const torch::Tensor input =
      hidden_states.for_projection.defined() ? hidden_states.for_projection : precision::as_projection_input(x);
  Tensors qkv = {project(policy_, query_, input), project(policy_, key_, input), project(policy_, value_, input)};
  if (selective_) qkv = refill_in_backward(input, hidden_states.narrow_again, qkv);
  for (auto& t : qkv) t = split_heads(t, heads_);  // (B, h, S, d) each
  const auto core = [runner = attention_core_runner_, p = dropout_, training = is_training(),
                     mask_bias](const Tensors& in) {  // runs again in backward
    return Tensors{
        runner(in, [&](const Tensors& t) { return attention_core(t[0], t[1], t[2], mask_bias, p, training); })};
  };
  // selective: the attention output's input is the core's again too, run before its backward (the same masks).
  const Recomputation context_again =
      selective_ ? with_generator_of_now([core, qkv] { return merge_heads(core(qkv)[0]); }, x.device().type())
                 : nullptr;
  const torch::Tensor context =
      merge_heads(selective_ ? recompute_in_backward(core, qkv, *this, policy_)[0] : core(qkv)[0]);
  torch::Tensor attention = project(policy_, attention_out_, context);
  if (selective_) attention = refill_in_backward(context, context_again, {attention})[0];
  return ops::dropout_add(attention, x, dropout_, is_training());  // (B, S, H), before the norm
}

torch::Tensor BertLayerImpl::feed_forward(const Hidden& attended) {
  torch::Tensor up = project(policy_, intermediate_, attended.for_projection);  // (B, S, I)
  if (selective_) up = refill_in_backward(attended.for_projection, attended.narrow_again, {up})[0];
  const torch::Tensor activated = ops::gelu(up);
  torch::Tensor out = project(policy_, output_, activated);  // (B, S, H)
  if (selective_) out = refill_in_backward(activated, [up] { return ops::gelu(up); }, {out})[0];
  return ops::dropout_add(out, attended.states, dropout_, is_training());  // before the norm
}

BertModelImpl::BertModelImpl(const BertConfig& config, bool with_pooler, const precision::ModulePolicy& policy,
                             const std::string& prefix)
    : config_(config), policy_(policy) {
  const std::string at = prefix.empty() ? "" : prefix + ".";
  embeddings = register_module("embeddings", BertEmbeddings(config, policy, at + "embeddings"));
  auto encoder = register_module("encoder", NamedScope());
  auto layer_list = encoder->register_module("layer", torch::nn::ModuleList());
  for (int64_t i = 0; i < config.layers; ++i) {
    layers_.push_back(BertLayer(config, policy, at + "encoder.layer." + std::to_string(i)));
    layer_list->push_back(layers_.back());
  }
  if (with_pooler) {
    auto pooler = register_module("pooler", NamedScope());
    pooler_ = pooler->register_module("dense", torch::nn::Linear(config.hidden, config.hidden));
  }
}

torch::Tensor BertModelImpl::forward(const torch::Tensor& ids) {
  MPT_CHECK(ids.dim() == 2, "BERT takes token ids of shape (batch, sequence)");
  // (B, 1, 1, S): a large negative score for [PAD] keys, so no position attends to padding.
  const torch::Tensor mask_bias =
      ids.eq(config_.pad_id).to(torch::kFloat).mul(kMaskedScore).view({ids.size(0), 1, 1, ids.size(1)});
  Hidden x{embeddings->forward(ids), torch::Tensor()};
  for (size_t i = 0; i < layers_.size(); ++i) {
    const bool next_has_projection = i + 1 < layers_.size();
    if (config_.recompute != Recompute::kFull) {
      x = layers_[i]->forward(x, mask_bias, next_has_projection);
      continue;
    }
    BertLayerImpl* layer = layers_[i].get();  // full: the layer keeps only its input and runs again in backward
    const Tensors out = recompute_in_backward(
        [layer, mask_bias, next_has_projection](const Tensors& in) {  // by value: it runs again in backward
          const Hidden h = layer->forward(Hidden{in[0], in[1]}, mask_bias, next_has_projection);
          return Tensors{h.states, h.for_projection};
        },
        {x.states, x.for_projection}, *layer, policy_);
    // The narrow copy it keeps beside the states is the states rounded, as the norm's fused narrowing rounds as a
    // cast does: let go of it until the layer's backward.
    const torch::Tensor states =
        x.for_projection.defined() && !x.for_projection.is_alias_of(x.states)
            ? refill_in_backward(x.for_projection, cast_again(x.states, x.for_projection), {out[0]})[0]
            : out[0];
    x = Hidden{states, out[1]};
  }
  return x.states;  // (B, S, H)
}

torch::Tensor BertModelImpl::pool(const torch::Tensor& hidden) {
  MPT_CHECK(pooler_, "this BERT has no pooler");
  return torch::tanh(project(policy_, pooler_, hidden.select(1, 0)));  // the [CLS] state: (B, H)
}

BertForMaskedLmImpl::BertForMaskedLmImpl(const BertConfig& config, const precision::ModulePolicy& policy)
    : config_(config), policy_(policy) {
  bert_ = register_module("bert", BertModel(config, /*with_pooler=*/false, policy, "bert"));
  // The lookup's gradient touches only the B*S rows in the batch. As a sparse tensor, autograd adds it in place
  // into the decoder's dense gradient of the same tied matrix, where a dense one costs a zeroed (V, H) buffer and
  // a (V, H) add per step (94 MB each for bert-base). The weight's .grad stays dense: the decoder's part is.
  bert_->embeddings->word_embeddings->options.sparse(true);
  auto cls = register_module("cls", NamedScope());
  auto predictions = cls->register_module("predictions", NamedScope());
  auto transform = predictions->register_module("transform", NamedScope());
  transform_ = transform->register_module("dense", torch::nn::Linear(config.hidden, config.hidden));
  transform_norm_ = transform->register_module("LayerNorm", layer_norm(config));
  // The decoder's weight is the word-embedding matrix (tied, as in BERT); only its bias is the head's own.
  decoder_bias_ = predictions->register_parameter("bias", torch::zeros({config.vocab_size}));
  head_runner_ = policy.runner("cls.predictions");
  head_in_fp32_ = policy.runs_in_fp32("cls.predictions");
  transform_norm_runner_ = policy.runner("cls.predictions.transform.LayerNorm");
  decoder_runner_ = policy.runner("cls.predictions.decoder", "tied Linear");
  init_weights(*this, config.pad_id);
}

torch::Tensor BertForMaskedLmImpl::head(const torch::Tensor& hidden) {
  return head_runner_(hidden, [&](const torch::Tensor& x) {
    const torch::Tensor h = layer_norm_through(transform_norm_runner_, transform_norm_,
                                               ops::gelu(project(policy_, transform_, x)));  // (N, H)
    return decoder_runner_(h, [&](const torch::Tensor& in) {
      const torch::Tensor& embedding = bert_->embeddings->word_embeddings->weight;
      return tied_decoder(in, embedding.to(in.scalar_type()), decoder_bias_.to(in.scalar_type()));
    });
  });
}

std::set<std::string> BertForMaskedLmImpl::tied_to_fp32_islands() const {
  if (!head_in_fp32_) return {};
  return {"bert.embeddings.word_embeddings.weight"};
}

std::vector<std::pair<std::string, int64_t>> BertForMaskedLmImpl::functional_gemm_dims(
    const precision::ModulePolicy& policy) const {
  if (policy.runs_in_fp32("cls.predictions")) return {};
  return {{"cls.predictions decoder (the vocabulary)", config_.vocab_size}};
}

torch::Tensor BertForMaskedLmImpl::forward(const torch::Tensor& inputs) {
  const torch::Tensor hidden = bert_->forward(inputs);                                           // (B, S, H)
  return head(hidden.reshape({-1, config_.hidden})).view({inputs.size(0), inputs.size(1), -1});  // (B, S, V)
}

Prediction BertForMaskedLmImpl::predict(const torch::Tensor& inputs, const torch::Tensor& targets,
                                        const torch::Tensor& target_positions) {
  const torch::Tensor hidden = bert_->forward(inputs).reshape({-1, config_.hidden});  // (B*S, H)
  const torch::Tensor flat_targets = targets.reshape({-1});
  // The loader's positions when it sent them: on a GPU, nonzero() must read the count back, a host sync.
  const torch::Tensor positions =
      target_positions.defined() ? target_positions : data::target_positions(targets);        // (M)
  return {head(hidden.index_select(0, positions)), flat_targets.index_select(0, positions)};  // (M, V), (M)
}

int64_t bert_encoder_macs(const BertConfig& c, int64_t seq_len) {
  const int64_t projections = 4 * c.hidden * c.hidden * seq_len;  // Q, K, V, attention output
  const int64_t attention = 2 * seq_len * seq_len * c.hidden;     // Q K^T and probs V over all heads
  const int64_t feed_forward = 2 * c.hidden * c.intermediate * seq_len;
  return c.layers * (projections + attention + feed_forward);
}

int64_t BertForMaskedLmImpl::forward_macs(const data::SampleShape& sample) const {
  const auto predicted =
      static_cast<int64_t>(std::llround(sample.masked_fraction * static_cast<double>(sample.seq_len)));
  return bert_encoder_macs(config_, sample.seq_len) +
         predicted * (config_.hidden * config_.hidden + config_.hidden * config_.vocab_size);
}

BertForSequenceClassificationImpl::BertForSequenceClassificationImpl(const BertConfig& config,
                                                                     const precision::ModulePolicy& policy)
    : config_(config) {
  bert_ = register_module("bert", BertModel(config, /*with_pooler=*/true, policy, "bert"));
  classifier_ = register_module("classifier", torch::nn::Linear(config.hidden, config.num_classes));
  classifier_runner_ = policy.runner("classifier");
  init_weights(*this, config.pad_id);
}

torch::Tensor BertForSequenceClassificationImpl::forward(const torch::Tensor& inputs) {
  torch::Tensor pooled = maybe_dropout(bert_->pool(bert_->forward(inputs)), config_.dropout, is_training());  // (B, H)
  return classifier_runner_(pooled, [&](const torch::Tensor& h) { return classifier_->forward(h); });         // (B, K)
}

int64_t BertForSequenceClassificationImpl::forward_macs(const data::SampleShape& sample) const {
  return bert_encoder_macs(config_, sample.seq_len) + config_.hidden * config_.hidden +
         config_.hidden * config_.num_classes;
}

}  // namespace mpt::models
