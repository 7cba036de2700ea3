// The master_weights strategy: low-precision model weights outside the FP32 islands, FP32 masters that the
// optimizer updates, and the copies between them.
#include <catch2/catch.hpp>

#include "models/mlp.h"
#include "models/registry.h"
#include "precision/autocast.h"
#include "precision/master_weights.h"
#include "tests/support/helpers.h"

using namespace mpt::precision;

TEST_CASE("master_weights keeps FP32 masters and BF16 model weights outside the islands", "[fast][precision]") {
  mpt::models::MlpConfig config;
  config.in_features = 6;
  config.hidden_sizes = {5};
  config.num_classes = 3;
  auto model = std::make_shared<mpt::models::MlpImpl>(config, ModulePolicy(std::vector<std::string>{"head"}));
  const torch::Tensor original = model->named_parameters()["hidden.0.weight"].detach().clone();
  MasterWeights master(*model, ModulePolicy(std::vector<std::string>{"head"}), torch::kBFloat16);

  auto params = model->named_parameters();
  CHECK(params["hidden.0.weight"].dtype() == torch::kBFloat16);
  CHECK(params["head.weight"].dtype() == torch::kFloat);  // an island keeps FP32 and is its own master
  CHECK(master.masters()["head.weight"].is_same(params["head.weight"]));
  for (const auto& item : master.masters()) CHECK(item.value().dtype() == torch::kFloat);
  CHECK(master.masters()["hidden.0.weight"].equal(original));  // the master is the exact FP32 value

  // Gradients flow to the masters in FP32; updated masters flow back, rounded to BF16.
  torch::Tensor logits;
  {
    AutocastScope autocast(torch::kCPU, torch::kBFloat16);  // master_weights always runs under autocast
    logits = model->forward(torch::randn({4, 6}));
  }
  logits.to(torch::kFloat).sum().backward();
  master.grads_to_masters();
  const torch::Tensor& grad = master.masters()["hidden.0.weight"].grad();
  REQUIRE(grad.defined());
  CHECK(grad.dtype() == torch::kFloat);
  {
    torch::NoGradGuard no_grad;
    master.masters()["hidden.0.weight"].add_(0.5);
  }
  master.masters_to_model();
  CHECK(params["hidden.0.weight"].equal((original + 0.5).to(torch::kBFloat16)));
}

TEST_CASE("master_weights keeps the norm layers' weights FP32 without listing them as islands", "[fast][precision]") {
  mpt::models::ModelConfig config;
  config.name = "resnet18";
  config.options.set("model.small_input", true);
  const ModulePolicy policy(std::vector<std::string>{"fc"});
  mpt::models::Model model = mpt::models::build_model(config, mpt::testing::image_sample(1, 28, 10), policy);
  MasterWeights master(*model, policy, torch::kBFloat16);
  auto params = model->named_parameters();
  CHECK(params["layer1.0.conv1.weight"].dtype() == torch::kBFloat16);
  CHECK(params["layer1.0.bn1.weight"].dtype() == torch::kFloat);
  CHECK(params["layer2.0.downsample.1.bias"].dtype() == torch::kFloat);
  CHECK(master.masters()["layer1.0.bn1.weight"].is_same(params["layer1.0.bn1.weight"]));

  // A training step under autocast: BF16 convolutions feed FP32-weighted batch norms.
  model->train();
  torch::Tensor logits;
  {
    AutocastScope autocast(torch::kCPU, torch::kBFloat16);
    logits = model->forward(torch::randn({4, 1, 28, 28}));
  }
  logits.to(torch::kFloat).sum().backward();
  master.grads_to_masters();
  CHECK(params["layer1.0.bn1.weight"].grad().dtype() == torch::kFloat);
  CHECK(model->named_buffers()["layer1.0.bn1.running_var"].dtype() == torch::kFloat);
  CHECK(torch::isfinite(logits).all().item<bool>());
}

TEST_CASE("master_weights keeps FP32 the modules inside an island, so BERT's MLM head trains", "[fast][precision]") {
  CHECK(ModulePolicy(std::vector<std::string>{"cls.predictions"}).runs_in_fp32("cls.predictions.transform.dense"));
  CHECK_FALSE(ModulePolicy(std::vector<std::string>{"cls.predictions"}).runs_in_fp32("cls.predictionsx.dense"));
  CHECK_FALSE(ModulePolicy(std::vector<std::string>{"cls.predictions"}).keeps_fp32("cls.predictions.transform.dense"));

  mpt::models::ModelConfig config;
  config.name = "bert-tiny";
  config.dropout = 0.0;
  mpt::data::SampleShape sample;
  sample.seq_len = 8;
  sample.vocab_size = 50;
  sample.masked_fraction = 0.25;
  const ModulePolicy policy(std::vector<std::string>{"*LayerNorm", "cls.predictions"});
  mpt::models::Model model = mpt::models::build_model(config, sample, policy);
  const std::set<std::string> tied = model->tied_to_fp32_islands();
  CHECK(tied == std::set<std::string>{"bert.embeddings.word_embeddings.weight"});
  MasterWeights master(*model, policy, torch::kBFloat16, tied);
  auto params = model->named_parameters();
  CHECK(params["cls.predictions.transform.dense.weight"].dtype() == torch::kFloat);
  CHECK(params["cls.predictions.bias"].dtype() == torch::kFloat);
  CHECK(params["bert.encoder.layer.0.attention.self.query.weight"].dtype() == torch::kBFloat16);
  // Tied to the FP32 decoder, so kept FP32: its own master, no per-step widening for the head.
  CHECK(params["bert.embeddings.word_embeddings.weight"].dtype() == torch::kFloat);
  CHECK(master.masters()["bert.embeddings.word_embeddings.weight"].is_same(
      params["bert.embeddings.word_embeddings.weight"]));
  CHECK(params["bert.embeddings.position_embeddings.weight"].dtype() == torch::kBFloat16);

  const torch::Tensor ids = torch::randint(5, 50, {2, 8}, torch::kLong);
  torch::Tensor targets = torch::full({2, 8}, -100, torch::kLong);
  targets.index_put_({0, 3}, 7);
  targets.index_put_({1, 5}, 9);
  mpt::models::Prediction prediction;
  {
    AutocastScope autocast(torch::kCPU, torch::kBFloat16);
    prediction = model->predict(ids, targets);
  }
  CHECK(prediction.logits.dtype() == torch::kFloat);
  torch::nn::functional::cross_entropy(prediction.logits, prediction.targets).backward();
  master.grads_to_masters();
  CHECK(master.masters()["bert.embeddings.word_embeddings.weight"].grad().defined());
  CHECK(master.masters()["cls.predictions.transform.dense.weight"].grad().defined());
}
