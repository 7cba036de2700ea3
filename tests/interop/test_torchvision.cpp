// Weights move both ways between mpt and the real torch/torchvision/safetensors: a torchvision resnet50 state dict
// (torch.save, and safetensors' save_file) loads into mpt's resnet50 and gives the same logits; mpt's exports load
// into torchvision with torch.load(weights_only=True) or safetensors' load_file and load_state_dict(strict=True).
#include <catch2/catch.hpp>

#include <cstdlib>

#include "io/weights.h"
#include "models/registry.h"
#include "tests/support/helpers.h"

using namespace mpt;

namespace {

int python(const std::string& args) {
  const testing::CommandResult result =
      testing::run_python(testing::source_path("tests/interop/torchvision_reference.py") + " " + args);
  UNSCOPED_INFO(result.output);
  return result.exit_code;
}

torch::Tensor named(const io::NamedTensorList& tensors, const std::string& name) {
  for (const auto& [key, value] : tensors)
    if (key == name) return value;
  FAIL("no tensor " << name);
  return {};
}

}  // namespace

TEST_CASE("torchvision resnet50 weights round-trip through mpt with the same logits", "[slow][interop]") {
  if (const std::string missing = testing::python_missing("torchvision safetensors"); !missing.empty())
    MPT_SKIP(missing);
  const std::string dir = testing::scratch_dir("torchvision-interop");
  REQUIRE(python("save " + dir) == 0);

  models::ModelConfig config;
  config.name = "resnet50";
  models::Model model = models::build_model(config, testing::image_sample(3, 64, 1000), precision::ModulePolicy());
  for (const std::string file : {"torchvision.pt", "torchvision.safetensors"}) {
    const io::NamedTensorList torchvision_weights = io::read_weights(dir + "/" + file);
    const io::InitReport report = io::init_from_weights(*model, torchvision_weights, file);
    CHECK(report.loaded == 320);  // 161 parameters + 159 buffers, every one matched by name
    CHECK(report.fresh.empty());
    CHECK(report.unused.empty());
  }

  const io::NamedTensorList io_tensors = io::read_weights(dir + "/io.pt");
  model->eval();
  torch::NoGradGuard no_grad;
  const torch::Tensor logits = model->forward(named(io_tensors, "input"));
  // FP32 through 50 layers whose convolutions both sides sum in their own order: within 1e-4 of the logits' scale.
  const torch::Tensor reference = named(io_tensors, "logits");
  const double difference = (logits - reference).abs().max().item<double>();
  const double scale = std::max(1.0, reference.abs().max().item<double>());
  INFO("max |logit difference| " << difference << ", max |logit| " << scale);
  CHECK(difference <= 1e-4 * scale);

  io::NamedTensorList exported;
  for (const auto& item : model->named_parameters()) exported.emplace_back(item.key(), item.value());
  for (const auto& item : model->named_buffers()) exported.emplace_back(item.key(), item.value());
  io::write_weights(dir + "/mpt.pt", exported, "torch");
  io::write_weights(dir + "/mpt.safetensors", exported, "safetensors");
  CHECK(python("check " + dir + " " + dir + "/mpt.pt") == 0);
  CHECK(python("check " + dir + " " + dir + "/mpt.safetensors") == 0);
}

TEST_CASE("torchvision vit_b_16 weights round-trip through mpt's vit-b16 with the same logits", "[slow][interop]") {
  if (const std::string missing = testing::python_missing("torchvision safetensors"); !missing.empty())
    MPT_SKIP(missing);
  const std::string dir = testing::scratch_dir("torchvision-vit");
  REQUIRE(python("save " + dir + " vit_b_16") == 0);

  models::ModelConfig config;
  config.name = "vit-b16";
  models::Model model = models::build_model(config, testing::image_sample(3, 224, 1000), precision::ModulePolicy());
  int64_t values = 0;
  for (const auto& parameter : model->parameters()) values += parameter.numel();
  CHECK(values == 86567656);  // torchvision's vit_b_16
  for (const std::string file : {"torchvision.pt", "torchvision.safetensors"}) {
    const io::InitReport report = io::init_from_weights(*model, io::read_weights(dir + "/" + file), file);
    CHECK(report.loaded == 152);  // every tensor of the state dict, matched by name
    CHECK(report.fresh.empty());
    CHECK(report.unused.empty());
  }

  const io::NamedTensorList io_tensors = io::read_weights(dir + "/io.pt");
  model->eval();
  torch::NoGradGuard no_grad;
  const torch::Tensor reference = named(io_tensors, "logits");
  const double difference = (model->forward(named(io_tensors, "input")) - reference).abs().max().item<double>();
  const double scale = std::max(1.0, reference.abs().max().item<double>());
  INFO("max |logit difference| " << difference << ", max |logit| " << scale);
  CHECK(difference <= 1e-4 * scale);

  io::NamedTensorList exported;
  for (const auto& item : model->named_parameters()) exported.emplace_back(item.key(), item.value());
  io::write_weights(dir + "/mpt.pt", exported, "torch");
  io::write_weights(dir + "/mpt.safetensors", exported, "safetensors");
  CHECK(python("check " + dir + " " + dir + "/mpt.pt vit_b_16") == 0);
  CHECK(python("check " + dir + " " + dir + "/mpt.safetensors vit_b_16") == 0);
}
