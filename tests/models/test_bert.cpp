// BERT: Hugging Face's parameter counts and state-dict names, forward shapes, padding and the FP32 islands.
#include <catch2/catch.hpp>

#include <optional>
#include <set>

#include "models/bert.h"
#include "models/registry.h"
#include "precision/autocast.h"

using namespace mpt::models;

namespace {

const std::vector<std::string> kDefaultFp32{"*LayerNorm", "cls.predictions", "classifier"};

mpt::data::SampleShape text_shape(int64_t seq_len, int64_t vocab, int64_t classes) {
  mpt::data::SampleShape shape;
  shape.seq_len = seq_len;
  shape.vocab_size = vocab;
  shape.num_classes = classes;
  shape.masked_fraction = classes > 0 ? 0.0 : 0.15;
  return shape;
}

Model bert(const std::string& name, const std::string& head, int64_t classes, int64_t vocab = 30522,
           const std::vector<std::string>& fp32 = kDefaultFp32) {
  ModelConfig config;
  config.name = name;
  config.options.set("model.head", std::string(head));
  config.dropout = 0.0;
  return build_model(config, text_shape(128, vocab, classes), mpt::precision::ModulePolicy(fp32));
}

int64_t count(const torch::nn::Module& module) {
  int64_t total = 0;
  for (const auto& p : module.parameters()) total += p.numel();
  return total;
}

std::set<std::string> state_names(const torch::nn::Module& module) {
  std::set<std::string> names;
  for (const auto& p : module.named_parameters()) names.insert(p.key());
  for (const auto& b : module.named_buffers()) names.insert(b.key());
  return names;
}

}  // namespace

TEST_CASE("bert-base BertModel with pooler has HF's 109,482,240 parameters and names", "[fast][models]") {
  BertConfig config = bert_preset("bert-base");
  BertModel model(config, /*with_pooler=*/true, mpt::precision::ModulePolicy(), "");
  CHECK(count(*model) == 109482240);
  const std::set<std::string> names = state_names(*model);
  CHECK(names.size() == 199);  // 5 embedding tensors + 12 layers x 16 + pooler 2
  for (const char* expected :
       {"embeddings.word_embeddings.weight", "embeddings.position_embeddings.weight",
        "embeddings.token_type_embeddings.weight", "embeddings.LayerNorm.weight", "embeddings.LayerNorm.bias",
        "encoder.layer.0.attention.self.query.weight", "encoder.layer.0.attention.self.key.bias",
        "encoder.layer.0.attention.self.value.weight", "encoder.layer.0.attention.output.dense.weight",
        "encoder.layer.0.attention.output.LayerNorm.weight", "encoder.layer.0.intermediate.dense.weight",
        "encoder.layer.11.output.dense.bias", "encoder.layer.11.output.LayerNorm.bias", "pooler.dense.weight",
        "pooler.dense.bias"})
    CHECK(names.count(expected) == 1);
}

TEST_CASE("BertForMaskedLM: bert.* without pooler, cls.predictions.*, decoder tied to the embeddings",
          "[fast][models]") {
  Model model = bert("bert-base", "mlm", 0);
  CHECK(count(*model) == 109514298);  // HF BertForMaskedLM: the tied decoder adds only its bias
  const std::set<std::string> names = state_names(*model);
  for (const char* expected : {"bert.embeddings.word_embeddings.weight", "cls.predictions.bias",
                               "cls.predictions.transform.dense.weight", "cls.predictions.transform.LayerNorm.bias"})
    CHECK(names.count(expected) == 1);
  CHECK(names.count("bert.pooler.dense.weight") == 0);
  CHECK(names.count("cls.predictions.decoder.weight") == 0);  // the word embeddings, not a copy
}

TEST_CASE("a BERT layer computes the textbook encoder layer (per-head attention, post-LayerNorm, GELU)",
          "[fast][models]") {
  // An independent computation from the layer's own named parameters: separate Q, K, V projections, heads split
  // one by one, [PAD] keys masked. Pins mpt's fused QKV projection and head layout to the formula.
  BertConfig config;
  config.hidden = 32;
  config.heads = 4;
  config.intermediate = 64;
  config.dropout = 0.0;
  torch::manual_seed(7);
  BertLayer layer(config, mpt::precision::ModulePolicy(kDefaultFp32), "encoder.layer.0");
  for (auto& p : layer->parameters()) p.data().normal_(0.0, 0.2);
  layer->eval();
  const torch::Tensor x = torch::randn({2, 5, 32});
  torch::Tensor mask_bias = torch::zeros({2, 1, 1, 5});
  mask_bias[1][0][0][4] = -1e4;  // the second sequence's last token is [PAD]
  const torch::Tensor out = layer->forward(x, mask_bias);

  auto p = layer->named_parameters();
  auto linear = [&](const torch::Tensor& in, const std::string& name) {
    return torch::matmul(in, p[name + ".weight"].t()) + p[name + ".bias"];
  };
  auto norm = [&](const torch::Tensor& in, const std::string& name) {
    return torch::layer_norm(in, {32}, p[name + ".weight"], p[name + ".bias"], config.layer_norm_eps);
  };
  const torch::Tensor q = linear(x, "attention.self.query"), k = linear(x, "attention.self.key"),
                      v = linear(x, "attention.self.value");
  std::vector<torch::Tensor> heads;
  for (int64_t h = 0; h < 4; ++h) {
    const torch::Tensor qh = q.narrow(2, h * 8, 8), kh = k.narrow(2, h * 8, 8), vh = v.narrow(2, h * 8, 8);
    const torch::Tensor scores = torch::matmul(qh, kh.transpose(1, 2)) / std::sqrt(8.0) + mask_bias.view({2, 1, 5});
    heads.push_back(torch::matmul(torch::softmax(scores, -1), vh));
  }
  const torch::Tensor attended =
      norm(linear(torch::cat(heads, 2), "attention.output.dense") + x, "attention.output.LayerNorm");
  const torch::Tensor expected =
      norm(linear(torch::gelu(linear(attended, "intermediate.dense")), "output.dense") + attended, "output.LayerNorm");
  INFO("max |difference| " << (out - expected).abs().max().item<double>());
  CHECK(torch::allclose(out, expected, 1e-5, 1e-5));
}

TEST_CASE("BERT presets follow Google's sizes", "[fast][models]") {
  CHECK(bert_preset("bert-tiny").layers == 2);
  CHECK(bert_preset("bert-tiny").hidden == 128);
  CHECK(bert_preset("bert-mini").heads == 4);
  CHECK(bert_preset("bert-medium").layers == 8);
  CHECK(bert_preset("bert-large").intermediate == 4096);
  CHECK_THROWS_WITH(bert_preset("bert-huge"), Catch::Contains("unknown BERT size"));
}

TEST_CASE("masked-LM: the tied word embeddings get one dense gradient, the same as with a dense lookup gradient",
          "[fast][models]") {
  torch::manual_seed(3);
  Model mlm = bert("bert-tiny", "mlm", 0, 1000);
  auto& lookup = *mlm->named_modules()["bert.embeddings.word_embeddings"]->as<torch::nn::EmbeddingImpl>();
  REQUIRE(lookup.options.sparse());  // the lookup's part is sparse and added in place into the decoder's
  torch::Tensor ids = torch::randint(5, 40, {3, 16}, torch::kLong);  // repeated tokens
  ids[1][14] = ids[1][15] = 0;                                       // and [PAD]
  torch::Tensor targets = torch::full({3, 16}, -100, torch::kLong);
  targets[0][3] = 7, targets[2][11] = 9, targets[1][0] = 11, targets[1][5] = 7;
  auto gradient = [&] {
    for (auto& p : mlm->parameters()) p.mutable_grad() = torch::Tensor();
    const Prediction prediction = mlm->predict(ids, targets);
    torch::nn::functional::cross_entropy(prediction.logits, prediction.targets).backward();
    return lookup.weight.grad();
  };
  const torch::Tensor with_sparse_lookup = gradient();
  REQUIRE(with_sparse_lookup.defined());
  CHECK(!with_sparse_lookup.is_sparse());
  lookup.options.sparse(false);
  const torch::Tensor with_dense_lookup = gradient();
  CHECK(torch::allclose(with_sparse_lookup, with_dense_lookup, /*rtol=*/1e-5, /*atol=*/1e-7));
  // Both parts are in it: rows of looked-up tokens that are never predicted get the lookup's gradient too.
  CHECK(with_dense_lookup[ids[0][0].item<int64_t>()].abs().sum().item<double>() >
        with_dense_lookup[999].abs().sum().item<double>());
}

TEST_CASE("masked-LM predicts only at targeted positions, and classification gives one row per sequence",
          "[fast][models]") {
  torch::manual_seed(0);
  Model mlm = bert("bert-tiny", "mlm", 0, 1000);
  const torch::Tensor ids = torch::randint(5, 1000, {3, 16}, torch::kLong);
  CHECK(mlm->forward(ids).sizes() == std::vector<int64_t>{3, 16, 1000});
  torch::Tensor targets = torch::full({3, 16}, -100, torch::kLong);
  targets[0][3] = 7, targets[2][15] = 9, targets[1][0] = 11;
  Prediction prediction = mlm->predict(ids, targets);
  CHECK(prediction.logits.sizes() == std::vector<int64_t>{3, 1000});
  CHECK(prediction.targets.equal(torch::tensor({7, 11, 9}, torch::kLong)));  // row-major order of the positions
  // The positions a loader found on the host select the same rows (the training path's, sync-free on a GPU).
  {
    torch::NoGradGuard no_grad;
    mlm->eval();
    const Prediction given = mlm->predict(ids, targets, torch::tensor({3, 16, 47}, torch::kLong));
    const Prediction found = mlm->predict(ids, targets);
    CHECK(given.targets.equal(found.targets));
    CHECK(given.logits.equal(found.logits));
    const Prediction other = mlm->predict(ids, targets, torch::tensor({3, 47}, torch::kLong));  // used as given
    CHECK(other.targets.equal(torch::tensor({7, 9}, torch::kLong)));
  }

  Model classifier = bert("bert-tiny", "classification", 4, 1000);
  CHECK(classifier->forward(ids).sizes() == std::vector<int64_t>{3, 4});
}

TEST_CASE("BERT ignores [PAD] positions: appended padding leaves the other outputs unchanged", "[fast][models]") {
  torch::manual_seed(1);
  Model mlm = bert("bert-tiny", "mlm", 0, 1000);
  mlm->eval();
  torch::NoGradGuard no_grad;
  const torch::Tensor ids = torch::randint(5, 1000, {2, 10}, torch::kLong);
  const torch::Tensor padded = torch::cat({ids, torch::zeros({2, 6}, torch::kLong)}, 1);  // [PAD] = 0
  const torch::Tensor short_logits = mlm->forward(ids);
  const torch::Tensor long_logits = mlm->forward(padded).narrow(1, 0, 10);
  CHECK(torch::allclose(short_logits, long_logits, /*rtol=*/1e-4, /*atol=*/1e-5));
}

TEST_CASE("under BF16 autocast BERT's heads give FP32 logits, and without the policy they are BF16", "[fast][models]") {
  torch::manual_seed(2);
  const torch::Tensor ids = torch::randint(5, 1000, {2, 8}, torch::kLong);
  const torch::Tensor targets = torch::randint(5, 1000, {2, 8}, torch::kLong);
  for (const bool fp32_heads : {true, false}) {
    Model mlm = bert("bert-tiny", "mlm", 0, 1000, fp32_heads ? kDefaultFp32 : std::vector<std::string>{"*LayerNorm"});
    Model classifier =
        bert("bert-tiny", "classification", 3, 1000, fp32_heads ? kDefaultFp32 : std::vector<std::string>{});
    mpt::precision::AutocastScope autocast(torch::kCPU, torch::kBFloat16);
    const auto expected = fp32_heads ? torch::kFloat : torch::kBFloat16;
    CHECK(mlm->predict(ids, targets).logits.scalar_type() == expected);
    CHECK(classifier->forward(ids).scalar_type() == expected);
  }
}

TEST_CASE("under BF16 autocast BERT's gradients stay close to FP32's, through the attention to the embeddings",
          "[fast][models]") {
  torch::manual_seed(11);
  Model mlm = bert("bert-tiny", "mlm", 0, 1000);
  const torch::Tensor ids = torch::randint(5, 1000, {4, 16}, torch::kLong);
  torch::Tensor targets = torch::full({4, 16}, -100, torch::kLong);
  for (int64_t i = 0; i < 4; ++i) targets[i][2 * i + 1] = 10 + i;
  auto gradients = [&](bool bf16) {
    mlm->zero_grad();
    {
      std::optional<mpt::precision::AutocastScope> autocast;
      if (bf16) autocast.emplace(torch::kCPU, torch::kBFloat16);
      const Prediction prediction = mlm->predict(ids, targets);
      torch::nn::functional::cross_entropy(prediction.logits, prediction.targets).backward();
    }
    std::vector<torch::Tensor> grads;
    for (const char* name :
         {"bert.encoder.layer.0.attention.self.query.weight", "bert.encoder.layer.0.attention.self.value.weight",
          "bert.embeddings.LayerNorm.weight", "bert.embeddings.position_embeddings.weight"})
      grads.push_back(mlm->named_parameters()[name].grad().view(-1));
    return torch::cat(grads);
  };
  const torch::Tensor fp32 = gradients(false), bf16 = gradients(true);
  REQUIRE(bf16.scalar_type() == torch::kFloat);
  CHECK(((bf16 - fp32).norm() / fp32.norm()).item<double>() < 0.05);
}

TEST_CASE("BERT MACs: encoder projections, attention and feed-forward, plus the masked positions' head",
          "[fast][models]") {
  const BertConfig base = bert_preset("bert-base");
  // Per layer at S=128: 4 H^2 S + 2 S^2 H + 2 H I S = 302.0M + 25.2M + 604.0M.
  CHECK(bert_encoder_macs(base, 128) == 12 * (4LL * 768 * 768 * 128 + 2LL * 128 * 128 * 768 + 2LL * 768 * 3072 * 128));
  Model mlm = bert("bert-base", "mlm", 0);
  const int64_t head = 19 * (768LL * 768 + 768LL * 30522);  // round(0.15 x 128) = 19 predicted positions
  CHECK(mlm->forward_macs(text_shape(128, 30522, 0)) == bert_encoder_macs(base, 128) + head);
}
