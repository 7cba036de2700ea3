// The Tensor Core shape check: which GEMM and convolution sizes it reports, and which it leaves alone.
#include <catch2/catch.hpp>

#include "models/resnet.h"
#include "models/registry.h"
#include "models/tensor_core_shapes.h"
#include "tests/support/helpers.h"

using namespace mpt::models;
using mpt::precision::Mode;

namespace {

mpt::precision::PrecisionConfig precision(const std::string& mode, std::vector<std::string> fp32_modules,
                                          bool tf32 = false) {
  mpt::precision::PrecisionConfig config;
  config.mode = mpt::precision::parse_mode(mode);
  config.fp32_modules = std::move(fp32_modules);
  config.tf32 = tf32;
  return config;
}

Model mlp(std::vector<int64_t> hidden_sizes) {
  ModelConfig config;
  config.name = "mlp";
  config.options.set("model.hidden_sizes", std::move(hidden_sizes));
  return build_model(config, mpt::testing::image_sample(1, 28, 10), mpt::precision::ModulePolicy({"head"}));
}

// "where dim value->rounded" per misfit, in the order reported.
std::vector<std::string> listed(const TensorCoreShapes& shapes) {
  std::vector<std::string> out;
  for (const auto& m : shapes.misfits)
    out.push_back(m.where + " " + m.dim + " " + std::to_string(m.value) + "->" + std::to_string(m.rounded));
  return out;
}

mpt::data::SampleShape masked_lm_sample(int64_t seq_len, int64_t vocab) {
  mpt::data::SampleShape sample;
  sample.seq_len = seq_len;
  sample.vocab_size = vocab;
  sample.masked_fraction = 0.15;
  return sample;
}

}  // namespace

TEST_CASE("Tensor Cores want multiples of 16 bytes: 8 FP16/BF16 elements, 4 TF32 ones, none for plain FP32",
          "[fast][models]") {
  CHECK(tensor_core_multiple(Mode::kMixedFp16, false) == 8);
  CHECK(tensor_core_multiple(Mode::kMixedBf16, true) == 8);
  CHECK(tensor_core_multiple(Mode::kFp32, true) == 4);
  CHECK(tensor_core_multiple(Mode::kFp32, false) == 0);
}

TEST_CASE("an MLP's misfit widths and batch rows are reported with the sizes to round to, and its FP32 head is not",
          "[fast][models]") {
  const Model model = mlp({1000, 300});
  const TensorCoreShapes shapes =
      tensor_core_shapes(*model, precision("mixed_fp16", {"head"}), mpt::testing::image_sample(1, 28, 10), 100);
  CHECK(shapes.multiple == 8);
  // 784 and 1000 are multiples of 8; 300 is not, and hidden.1's input is hidden.0's aligned 1000.
  CHECK(listed(shapes) == std::vector<std::string>{"hidden.1 out_features 300->304", "data.batch_size rows 100->104"});
  CHECK_THAT(describe(shapes), Catch::Contains("2 dimensions are not a multiple of 8") &&
                                   Catch::Contains("hidden.1 out_features 300 (-> 304)"));
  const nlohmann::json json = to_json(shapes);
  CHECK(json["multiple"] == 8);
  REQUIRE(json["misfits"].size() == 2);
  CHECK(json["misfits"][1] ==
        nlohmann::json{{"where", "data.batch_size"}, {"dim", "rows"}, {"value", 100}, {"rounded", 104}});

  // Without the FP32 island the head's GEMM runs in the compute dtype too, and its 10 classes miss.
  const TensorCoreShapes all =
      tensor_core_shapes(*model, precision("mixed_bf16", {}), mpt::testing::image_sample(1, 28, 10), 128);
  CHECK(listed(all) == std::vector<std::string>{"hidden.1 out_features 300->304", "head in_features 300->304",
                                                "head out_features 10->16"});
}

TEST_CASE("aligned shapes pass, and plain FP32 is not checked", "[fast][models]") {
  const Model model = mlp({512});
  const mpt::data::SampleShape sample = mpt::testing::image_sample(1, 28, 10);
  const TensorCoreShapes bf16 = tensor_core_shapes(*model, precision("mixed_bf16", {"head"}), sample, 128);
  CHECK(bf16.misfits.empty());
  CHECK(describe(bf16) == "Tensor Core shapes: every GEMM and convolution dimension is a multiple of 8");
  const TensorCoreShapes fp32 = tensor_core_shapes(*mlp({300}), precision("fp32", {"head"}), sample, 128);
  CHECK(fp32.multiple == 0);
  CHECK(fp32.misfits.empty());
  CHECK(describe(fp32).empty());
  CHECK(to_json(fp32).is_null());
  // TF32 wants multiples of 4: 300 is one.
  CHECK(tensor_core_shapes(*mlp({300}), precision("fp32", {"head"}, true), sample, 128).misfits.empty());
  CHECK(listed(tensor_core_shapes(*mlp({302}), precision("fp32", {"head"}, true), sample, 128)) ==
        std::vector<std::string>{"hidden.0 out_features 302->304"});
}

TEST_CASE("ResNet's convolutions fit, and its 1- or 3-channel stem is left to cuDNN", "[fast][models]") {
  for (int64_t channels : {1, 3}) {
    ModelConfig config;
    config.name = "resnet18";
    const mpt::data::SampleShape sample = mpt::testing::image_sample(channels, 32, 10);
    const Model model = build_model(config, sample, mpt::precision::ModulePolicy({"fc", "*bn*"}));
    const TensorCoreShapes shapes = tensor_core_shapes(*model, precision("mixed_fp16", {"fc", "*bn*"}), sample, 30);
    INFO(describe(shapes));
    CHECK(shapes.misfits.empty());  // the batch of 30 reaches no checked Linear: the fc is FP32
  }
}

TEST_CASE("BERT's tied MLM decoder is checked when it leaves the FP32 island: the vocabulary of 30522 misses",
          "[fast][models]") {
  ModelConfig config;
  config.name = "bert-tiny";
  config.dropout = 0.0;
  const mpt::data::SampleShape sample = masked_lm_sample(128, 30522);
  const std::vector<std::string> islands{"*LayerNorm", "cls.predictions"};
  const Model model = build_model(config, sample, mpt::precision::ModulePolicy(islands));
  CHECK(tensor_core_shapes(*model, precision("mixed_fp16", islands), sample, 3).misfits.empty());

  const std::vector<std::string> norms_only{"*LayerNorm"};
  const Model half_head = build_model(config, sample, mpt::precision::ModulePolicy(norms_only));
  const TensorCoreShapes shapes = tensor_core_shapes(*half_head, precision("mixed_fp16", norms_only), sample, 3);
  CHECK(listed(shapes) == std::vector<std::string>{"cls.predictions decoder (the vocabulary) size 30522->30528"});
  // Rows are batch x sequence: 3 x 127 tokens miss, 3 x 128 do not.
  const TensorCoreShapes odd =
      tensor_core_shapes(*half_head, precision("mixed_fp16", norms_only), masked_lm_sample(127, 30522), 3);
  CHECK(listed(odd).back() == "data.batch_size x data.seq_len rows 381->384");
}
