// ViT: torchvision's names and shapes, the image and patch checks, and the family's keys and islands in the spec.
// The oracle test against torchvision's vit_b_16 (names, values, logits, both directions) is in
// tests/interop/test_torchvision.cpp.
#include <catch2/catch.hpp>

#include "common/error.h"
#include "config/load.h"
#include "models/registry.h"
#include "run/resolve.h"
#include "tests/support/helpers.h"

using namespace mpt;

namespace {

models::Model vit(int64_t patch, int64_t size) {
  models::ModelConfig config;
  config.name = "vit-tiny";
  config.options.set("model.patch_size", patch);
  return models::build_model(config, testing::image_sample(1, size, 10), precision::ModulePolicy());
}

}  // namespace

TEST_CASE("vit-tiny on 28 px images in 7 px patches: torchvision's names, 17 tokens, logits per image",
          "[fast][models]") {
  torch::manual_seed(0);
  models::Model model = vit(7, 28);
  const auto parameters = model->named_parameters();
  CHECK(parameters.contains("class_token"));
  CHECK(parameters["encoder.pos_embedding"].sizes() == torch::IntArrayRef({1, 17, 192}));
  CHECK(parameters["conv_proj.weight"].sizes() == torch::IntArrayRef({192, 1, 7, 7}));
  CHECK(parameters["encoder.layers.encoder_layer_11.self_attention.in_proj_weight"].sizes() ==
        torch::IntArrayRef({576, 192}));
  CHECK(parameters.contains("encoder.layers.encoder_layer_0.mlp.3.bias"));
  CHECK(parameters.contains("encoder.ln.weight"));
  CHECK(parameters["heads.head.weight"].sizes() == torch::IntArrayRef({10, 192}));
  const torch::Tensor logits = model->forward(torch::randn({3, 1, 28, 28}));
  CHECK(logits.sizes() == torch::IntArrayRef({3, 10}));
  CHECK(model->forward_macs(testing::image_sample(1, 28, 10)) > 0);
}

TEST_CASE("a ViT refuses a patch that does not divide the image, naming model.patch_size", "[fast][models]") {
  CHECK_THROWS_WITH(vit(16, 28), Catch::Contains("model.patch_size = 16 does not divide the image size 28"));
  models::ModelConfig config;
  config.name = "vit-small";
  data::SampleShape text;
  text.seq_len = 16, text.vocab_size = 100;
  CHECK_THROWS_WITH(models::build_model(config, text, precision::ModulePolicy()),
                    Catch::Contains("ViT reads images; expected data.name: fashion_mnist"));
}

TEST_CASE("a ViT spec keeps the head and norms in FP32 by default, and model.patch_size is inert elsewhere",
          "[fast][models][config]") {
  config::Spec spec = config::parse_spec("model:\n  name: vit-tiny\n  patch_size: 7\n", "vit.yaml", {});
  run::resolve_spec(spec, hardware::Facts{false, 0, false});
  const auto islands = spec.get_string_list("precision.fp32_modules");
  CHECK(std::find(islands.begin(), islands.end(), "heads") != islands.end());
  CHECK(std::find(islands.begin(), islands.end(), "*.ln_1") != islands.end());
  CHECK_THAT(spec.origin("precision.fp32_modules"), Catch::Contains("ViT family's FP32 islands"));

  config::Spec mlp = config::parse_spec("model:\n  name: mlp\n  patch_size: 7\n", "mlp.yaml", {});
  CHECK_THROWS_WITH(run::resolve_spec(mlp, hardware::Facts{false, 0, false}),
                    Catch::Contains("model.patch_size") && Catch::Contains("vit-tiny"));
  config::Spec plain = config::parse_spec("model:\n  name: mlp\n", "mlp.yaml", {});
  run::resolve_spec(plain, hardware::Facts{false, 0, false});
  CHECK(plain.origin("precision.fp32_modules") == "default");  // the other families' islands are the default's
}
