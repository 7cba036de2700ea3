// `mpt numerics` end to end: its per-layer local SQNR (projections, convolutions, norms, attention cores, the loss)
// against PyTorch's own bfloat16 and float8 on the same weights and batch (tests/precision/numerics_reference.py), a
// planted outlier ranked first and kept by precision.fp32_modules: [auto], and the refusals of bad arguments.
#include <catch2/catch.hpp>

#include <filesystem>

#include "tests/support/helpers.h"

using namespace mpt::testing;

namespace {

const std::string kSpec = source_path("configs/mlp_fmnist_fp8.yaml");
const std::string kReference = source_path("tests/precision/numerics_reference.py");

// MLP weights written by PyTorch, or "" with the reason the test is skipped in `why`.
std::string torch_weights(const std::string& dir, const std::string& extra, std::string& why) {
  why = python_missing("torch safetensors");
  if (!why.empty()) return "";
  if (!std::filesystem::exists(kFashionMnistRoot)) {
    why = "no Fashion-MNIST (scripts/setup.sh installs it)";
    return "";
  }
  const std::string path = dir + "/weights.safetensors";
  const auto written = run_python(kReference + " weights " + path + " " + extra);
  REQUIRE(written.exit_code == 0);
  return path;
}

}  // namespace

TEST_CASE("mpt numerics: each layer's local SQNR under BF16 and FP8 equals PyTorch's on the same weights and batch",
          "[fast][cli][numerics]") {
  const std::string dir = scratch_dir("numerics-oracle");
  std::string why;
  const std::string weights = torch_weights(dir, "--hidden 256,128", why);
  if (weights.empty()) MPT_SKIP(why);
  const auto measured = run_mpt({"numerics", kSpec, "model.hidden_sizes=[256,128]", "data.batch_size=64",
                                 "model.init_from=" + weights, "--batches", "1", "--no-alone", "--out", dir});
  REQUIRE(measured.exit_code == 0);
  CHECK_THAT(measured.output, Catch::Contains("fp8: every layer it takes"));
  const auto checked = run_python(kReference + " check " + weights + " " + dir + "/numerics.json --data " +
                                  kFashionMnistRoot + " --batch 64");
  INFO(checked.output);
  CHECK(checked.exit_code == 0);
  CHECK_THAT(checked.output, Catch::Contains("hidden.1 fp8: mpt"));
  CHECK_THAT(checked.output, Catch::Contains("loss bf16: mpt"));
  CHECK(markup_problem(read_file_text(dir + "/numerics.html")).empty());
}

TEST_CASE("mpt numerics: each convolution's and batch norm's local SQNR under BF16 equals PyTorch's on a ResNet-18",
          "[fast][cli][numerics]") {
  if (const std::string missing = python_missing("torch torchvision safetensors"); !missing.empty()) MPT_SKIP(missing);
  if (!std::filesystem::exists(kFashionMnistRoot)) MPT_SKIP("no Fashion-MNIST (scripts/setup.sh installs it)");
  const std::string dir = scratch_dir("numerics-resnet-oracle"), weights = dir + "/resnet18.safetensors";
  REQUIRE(run_python(kReference + " resnet-weights " + weights).exit_code == 0);
  const auto measured =
      run_mpt({"numerics", source_path("configs/resnet18_fmnist_mixed.yaml"), "model.init_from=" + weights,
               "data.batch_size=32", "--batches", "1", "--no-alone", "--formats", "bf16,fp8", "--out", dir});
  INFO(measured.output);
  REQUIRE(measured.exit_code == 0);
  CHECK_THAT(measured.output, Catch::Contains("layer4.1.conv2") && Catch::Contains("BF16: FP8 takes projections only"));
  const auto checked = run_python(kReference + " resnet-check " + weights + " " + dir + "/numerics.json --data " +
                                  kFashionMnistRoot + " --batch 32");
  INFO(checked.output);
  CHECK(checked.exit_code == 0);
  CHECK_THAT(checked.output, Catch::Contains("layer2.0.downsample.0 bf16: mpt") && Catch::Contains("41 compared"));
}

TEST_CASE("mpt numerics: BERT-tiny's local SQNR under BF16 and FP8 equals PyTorch's from transformers' own inputs",
          "[slow][cli][numerics]") {
  if (const std::string missing = python_missing("torch transformers safetensors"); !missing.empty()) MPT_SKIP(missing);
  const std::string data = source_path("data/fortune_topics"), vocab = source_path("data/bert-base-uncased/vocab.txt");
  if (!std::filesystem::exists(vocab)) MPT_SKIP("no vocabulary (scripts/setup.sh installs it)");
  const std::string dir = scratch_dir("numerics-bert-oracle");
  REQUIRE(run_python(kReference + " bert-weights " + dir + "/hf --data " + data).exit_code == 0);
  const auto measured =
      run_mpt({"numerics", source_path("configs/bert_tiny_topics.yaml"), "model.init_from=" + dir + "/hf", "--batches",
               "1", "--no-alone", "--formats", "bf16,fp8", "--out", dir});
  INFO(measured.output);
  REQUIRE(measured.exit_code == 0);
  const auto checked = run_python(kReference + " bert-check " + dir + "/hf " + dir + "/numerics.json --data " + data +
                                  " --vocab " + vocab + " --batch 32 --seq 128");
  INFO(checked.output);
  CHECK(checked.exit_code == 0);
  CHECK_THAT(checked.output, Catch::Contains("bert.encoder.layer.1.output.dense fp8: mpt"));
  CHECK_THAT(checked.output, Catch::Contains("bert.encoder.layer.1.attention.self.core bf16: mpt"));
  CHECK_THAT(checked.output, Catch::Contains("bert.encoder.layer.1.output.LayerNorm bf16: mpt"));
}

TEST_CASE("mpt numerics ranks a layer whose inputs FP8's per-tensor scale crushes first, and auto keeps it FP32",
          "[fast][cli][numerics]") {
  const std::string dir = scratch_dir("numerics-planted");
  std::string why;
  const std::string weights = torch_weights(dir, "--hidden 512,128 --plant-outlier", why);
  if (weights.empty()) MPT_SKIP(why);
  const std::vector<std::string> model = {"model.hidden_sizes=[512,128]", "model.init_from=" + weights};
  std::vector<std::string> numerics = {"numerics",       kSpec,   "--batches",      "2", "--formats",
                                       "bf16,fp8,mxfp8", "--out", dir + "/numerics"};
  numerics.insert(numerics.begin() + 2, model.begin(), model.end());
  REQUIRE(run_mpt(numerics).exit_code == 0);
  const nlohmann::json report = read_json(dir + "/numerics/numerics.json");
  for (const auto& layer : report["layers"]) {
    if (layer["name"] != "hidden.1") continue;
    CHECK(layer["formats"]["fp8"]["rank"] == 1);
    CHECK(layer["formats"]["fp8"]["local"]["sqnr_db"].get<double>() < 3.0);
    CHECK(layer["formats"]["fp8"]["input"]["flushed_share"].get<double>() > 0.3);
    CHECK(layer["formats"]["mxfp8"]["rank"] == 1);
    CHECK(layer["formats"]["bf16"]["local"]["sqnr_db"].get<double>() > 45.0);  // BF16 has FP32's range
  }

  std::vector<std::string> train = {"train",     kSpec,       "precision.fp32_modules=[auto]", "train.max_steps=2",
                                    "--run-dir", dir + "/run"};
  train.insert(train.begin() + 2, model.begin(), model.end());
  const auto trained = run_mpt(train);
  INFO(trained.output);
  REQUIRE(trained.exit_code == 0);
  const nlohmann::json islands = read_json(dir + "/run/summary.json")["fp32_modules"];
  CHECK(islands["patterns"] == nlohmann::json::array({"head", "hidden.1"}));
  CHECK_THAT(islands["origin"].get<std::string>(), Catch::Contains("kept hidden.1 (local SQNR"));
  CHECK_THAT(read_file_text(dir + "/run/config.yaml"), Catch::Contains("fp32_modules: [head, hidden.1]"));
}

TEST_CASE("mpt numerics ranks a layer whose weights sit under FP16's range first, harmless in BF16 and FP8",
          "[fast][cli][numerics]") {
  const std::string dir = scratch_dir("numerics-tiny");
  std::string why;
  const std::string weights = torch_weights(dir, "--hidden 512,128 --plant-tiny", why);
  if (weights.empty()) MPT_SKIP(why);
  REQUIRE(run_mpt({"numerics", kSpec, "model.hidden_sizes=[512,128]", "model.init_from=" + weights, "--batches", "1",
                   "--formats", "bf16,fp16,fp8", "--no-alone", "--out", dir})
              .exit_code == 0);
  for (const auto& layer : read_json(dir + "/numerics.json")["layers"]) {
    if (layer["name"] != "hidden.1") continue;
    CHECK(layer["formats"]["fp16"]["rank"] == 1);
    CHECK(layer["formats"]["fp16"]["local"]["sqnr_db"].get<double>() < 1.0);
    CHECK(layer["formats"]["fp16"]["weight"]["flushed_share"].get<double>() > 0.99);
    CHECK(layer["formats"]["bf16"]["local"]["sqnr_db"].get<double>() > 45.0);
    CHECK(layer["formats"]["fp8"]["local"]["sqnr_db"].get<double>() > 25.0);  // the per-tensor scale re-ranges it
  }
}

TEST_CASE("precision.fp32_modules: [auto] keeps nothing more where no layer is damaged", "[fast][cli][numerics]") {
  const std::string dir = scratch_dir("numerics-auto-clean");
  const auto trained =
      run_mpt({"train", kSpec, "precision.fp32_modules=[auto]", "train.max_steps=2", "--run-dir", dir});
  INFO(trained.output);
  REQUIRE(trained.exit_code == 0);
  const nlohmann::json islands = read_json(dir + "/summary.json")["fp32_modules"];
  CHECK(islands["patterns"] == nlohmann::json::array({"head"}));
  CHECK_THAT(islands["origin"].get<std::string>(), Catch::Contains("no layer below 19 dB"));
}

TEST_CASE("mpt numerics refuses unknown formats and missing weights with one line", "[fast][cli][numerics]") {
  const auto format = run_mpt({"numerics", kSpec, "--formats", "bf16,fp9"});
  CHECK(format.exit_code == 2);
  CHECK_THAT(format.output, Catch::Contains("--formats: 'fp9' is not a format; expected bf16, fp16, fp8 or mxfp8"));
  const auto from = run_mpt({"numerics", kSpec, "--from", "/nonexistent/run"});
  CHECK(from.exit_code == 2);
  CHECK_THAT(from.output, Catch::Contains("/nonexistent/run: no such checkpoint or run directory"));
  const auto empty = run_mpt({"numerics", kSpec, "data.train_limit=10"});
  CHECK(empty.exit_code == 2);
  CHECK_THAT(empty.output, Catch::Contains("data.batch_size = 128 is larger than the 10 samples available"));
}
