// Llama: transformers' names and parameter counts for both presets, causality, grouped-query heads, document
// attention, the family's checks. The oracle tests against transformers' LlamaForCausalLM (names both ways, logits
// on import and export, pipeline) are in tests/interop/test_llama_interop.cpp.
#include <catch2/catch.hpp>

#include <fstream>

#include "common/error.h"
#include "models/llama.h"
#include "models/registry.h"
#include "precision/autocast.h"
#include "tests/support/helpers.h"

using namespace mpt;

namespace {

data::SampleShape text_sample(int64_t vocab, int64_t seq_len = 16) {
  data::SampleShape sample;
  sample.seq_len = seq_len, sample.vocab_size = vocab, sample.causal = true, sample.eot_id = 0;
  return sample;
}

models::Model llama(const std::string& name, const data::SampleShape& sample,
                    const std::vector<std::string>& fp32 = {}) {
  models::ModelConfig config;
  config.name = name;
  return models::build_model(config, sample, precision::ModulePolicy(fp32));
}

int64_t parameter_count(const models::Model& model) {
  int64_t count = 0;
  for (const auto& parameter : model->parameters()) count += parameter.numel();
  return count;
}

}  // namespace

TEST_CASE("llama-135m has SmolLM-135M's names, shapes and 134,515,008 parameters, llama-tiny a few million",
          "[fast][models]") {
  torch::NoGradGuard no_grad;
  const models::Model smol = llama("llama-135m", text_sample(49152));
  CHECK(parameter_count(smol) == 134515008);
  const auto parameters = smol->named_parameters();
  CHECK(parameters["model.embed_tokens.weight"].sizes() == torch::IntArrayRef({49152, 576}));
  CHECK(parameters["model.layers.29.self_attn.k_proj.weight"].sizes() == torch::IntArrayRef({192, 576}));
  CHECK(parameters["model.layers.0.mlp.gate_proj.weight"].sizes() == torch::IntArrayRef({1536, 576}));
  CHECK(parameters.contains("model.layers.0.input_layernorm.weight"));
  CHECK(parameters.contains("model.layers.0.post_attention_layernorm.weight"));
  CHECK(parameters.contains("model.norm.weight"));
  CHECK_FALSE(parameters.contains("lm_head.weight"));  // tied to the embeddings
  CHECK(parameters.size() == 1 + 30 * 9 + 1);
  const int64_t tiny = parameter_count(llama("llama-tiny", text_sample(8192)));
  CHECK(tiny > 2000000);
  CHECK(tiny < 10000000);
}

TEST_CASE("a Llama is causal: a later token changes no earlier logit, and predict scores only targeted positions",
          "[fast][models]") {
  torch::manual_seed(0);
  const models::Model model = llama("llama-tiny", text_sample(100));
  model->eval();
  torch::NoGradGuard no_grad;
  const torch::Tensor ids = torch::randint(1, 100, {2, 16});
  torch::Tensor changed = ids.clone();
  changed.select(1, 10).fill_(7);
  const torch::Tensor a = model->forward(ids), b = model->forward(changed);
  CHECK(a.sizes() == torch::IntArrayRef({2, 16, 100}));
  CHECK(torch::equal(a.narrow(1, 0, 10), b.narrow(1, 0, 10)));
  CHECK_FALSE(torch::allclose(a.narrow(1, 10, 6), b.narrow(1, 10, 6)));
  torch::Tensor targets = torch::randint(0, 100, {2, 16});
  targets.select(1, 3).fill_(-100);
  const models::Prediction prediction = model->predict(ids, targets);
  CHECK(prediction.logits.sizes() == torch::IntArrayRef({30, 100}));
  CHECK(torch::allclose(prediction.logits[0], a[0][0], 1e-5, 1e-5));
  CHECK(torch::allclose(prediction.logits[3], a[0][4], 1e-5, 1e-5));  // position 3 left out
}

TEST_CASE("document attention keeps a document from seeing the one before its end-of-text token", "[fast][models]") {
  torch::manual_seed(0);
  data::SampleShape sample = text_sample(50);
  sample.document_attention = true;
  const models::Model model = llama("llama-tiny", sample);
  model->eval();
  torch::NoGradGuard no_grad;
  torch::Tensor ids = torch::randint(1, 50, {1, 16});
  ids[0][5] = 0;  // the first document is positions 0..5, its end-of-text token included
  torch::Tensor other = ids.clone();
  other.narrow(1, 0, 5).fill_(9);
  const torch::Tensor a = model->forward(ids), b = model->forward(other);
  CHECK(torch::allclose(a.narrow(1, 6, 10), b.narrow(1, 6, 10), 1e-5, 1e-5));
  CHECK_FALSE(torch::allclose(a.narrow(1, 0, 6), b.narrow(1, 0, 6)));
  // The second document alone gives the same logits: its positions restart nowhere, rotary angles are relative.
  const torch::Tensor alone = model->forward(ids.narrow(1, 6, 10));
  CHECK(torch::allclose(a.narrow(1, 6, 10), alone, 1e-4, 1e-4));
}

TEST_CASE("a Llama refuses data without next-token targets and sequences past its positions", "[fast][models]") {
  data::SampleShape masked;
  masked.seq_len = 16, masked.vocab_size = 100;
  CHECK_THROWS_WITH(llama("llama-tiny", masked), Catch::Contains("causal language model"));
  CHECK_THROWS_WITH(llama("llama-tiny", text_sample(100, 4096)),
                    Catch::Contains("exceeds llama-tiny's 2048 positions"));
  models::ModelConfig bert;
  bert.name = "bert-tiny";
  CHECK_THROWS_WITH(models::build_model(bert, text_sample(100), precision::ModulePolicy()),
                    Catch::Contains("is an encoder"));
  models::ModelConfig bare;
  bare.name = "llama";
  CHECK_THROWS_WITH(models::build_model(bare, text_sample(100), precision::ModulePolicy()),
                    Catch::Contains("model.hf_config"));
}

TEST_CASE("a Llama config.json: grouped-query heads, rope_theta in either place, unsupported keys named",
          "[fast][models]") {
  const std::string dir = testing::scratch_dir("llama_config");
  auto write = [&](const std::string& text) {
    std::ofstream(dir + "/config.json") << text;
    return dir;
  };
  const std::string base =
      R"("model_type": "llama", "vocab_size": 320, "hidden_size": 64, "intermediate_size": 128,
         "num_hidden_layers": 2, "num_attention_heads": 4, "num_key_value_heads": 2, "rms_norm_eps": 1e-6)";
  models::LlamaConfig config = models::read_hf_llama_config(write("{" + base + R"(, "rope_theta": 500000.0})"));
  CHECK(config.kv_heads == 2);
  CHECK(config.head_dim == 16);
  CHECK(config.rope_theta == 500000.0);
  CHECK_FALSE(config.tie_embeddings);  // LlamaConfig's default
  config = models::read_hf_llama_config(
      write("{" + base +
            R"(, "rope_parameters": {"rope_type": "default", "rope_theta": 1000.0}, "tie_word_embeddings": true})"));
  CHECK(config.rope_theta == 1000.0);
  CHECK(config.tie_embeddings);
  CHECK_THROWS_WITH(models::read_hf_llama_config(write("{" + base + R"(, "rope_scaling": {"rope_type": "llama3"}})")),
                    Catch::Contains("rope_type") && Catch::Contains("\"default\""));
  CHECK_THROWS_WITH(models::read_hf_llama_config(write(R"({"model_type": "bert"})")), Catch::Contains("model_type"));
  CHECK_THROWS_WITH(models::read_hf_llama_config(write(R"({"model_type": "llama", "vocab_size": 320, "hidden_size": 64,
         "intermediate_size": 128, "num_hidden_layers": 2, "num_attention_heads": 4, "num_key_value_heads": 3})")),
                    Catch::Contains("not a multiple of num_key_value_heads 3"));
  // The written config.json reads back as the same architecture.
  models::LlamaConfig tiny = models::llama_preset("llama-tiny");
  tiny.vocab_size = 500;
  const models::LlamaConfig again = models::read_hf_llama_config(write(models::hf_llama_config(tiny).dump()));
  CHECK(again.hidden == tiny.hidden);
  CHECK(again.kv_heads == tiny.kv_heads);
  CHECK(again.tie_embeddings);
}

TEST_CASE("a Llama whose norms are FP32 islands and whose tied head is not trains under BF16 autocast",
          "[fast][models]") {
  torch::manual_seed(0);
  const models::Model model = llama("llama-tiny", text_sample(64), {"*layernorm", "model.norm"});
  const torch::Tensor ids = torch::randint(1, 64, {2, 16}), targets = ids.roll(-1, 1);
  models::Prediction prediction;
  {
    precision::AutocastScope autocast(torch::kCPU, torch::kBFloat16);
    prediction = model->predict(ids, targets);
  }
  CHECK(prediction.logits.scalar_type() == torch::kBFloat16);  // the head in the compute dtype
  torch::nn::functional::cross_entropy(prediction.logits.to(torch::kFloat), prediction.targets).backward();
  const torch::Tensor grad = model->named_parameters()["model.embed_tokens.weight"].grad();
  REQUIRE(grad.defined());
  CHECK(grad.isfinite().all().item<bool>());
}
