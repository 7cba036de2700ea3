// safetensors and PyTorch zip weight files: layout, round trips, malformed files, and init_from's name matching.
#include <catch2/catch.hpp>

#include <cstring>

#include "common/error.h"
#include "common/files.h"
#include "io/weights.h"
#include "models/bert.h"
#include "models/registry.h"
#include "tests/support/helpers.h"

using namespace mpt::io;

namespace {

NamedTensorList sample_tensors() {
  return {{"a.weight", torch::arange(6, torch::kFloat).view({2, 3})},
          {"a.bias", torch::tensor({1.5f, -2.0f}).to(torch::kBFloat16)},
          {"steps", torch::tensor(7, torch::kLong)},
          {"mask", torch::tensor({true, false, true})},
          {"empty", torch::zeros({0, 4})}};
}

void check_same(const NamedTensorList& a, const NamedTensorList& b) {
  REQUIRE(a.size() == b.size());
  for (size_t i = 0; i < a.size(); ++i) {
    CHECK(a[i].first == b[i].first);
    CHECK(a[i].second.scalar_type() == b[i].second.scalar_type());
    CHECK(a[i].second.sizes() == b[i].second.sizes());
    CHECK(a[i].second.equal(b[i].second));
  }
}

std::string with_header(const std::string& json, const std::string& data) {
  std::string out(8, '\0');
  const uint64_t length = json.size();
  std::memcpy(out.data(), &length, 8);
  return out + json + data;
}

}  // namespace

TEST_CASE("safetensors: length, 8-byte aligned JSON header, packed data, and round trip keeps dtypes", "[fast][io]") {
  const std::string bytes = encode_safetensors(sample_tensors(), {{"format", "pt"}});
  uint64_t length = 0;
  std::memcpy(&length, bytes.data(), 8);
  CHECK(bytes[8] == '{');
  CHECK((8 + length) % 8 == 0);
  const auto header = nlohmann::json::parse(bytes.substr(8, length));
  CHECK(header["__metadata__"]["format"] == "pt");
  CHECK(header["a.weight"]["dtype"] == "F32");
  CHECK(header["a.weight"]["shape"] == nlohmann::json::array({2, 3}));
  CHECK(header["a.weight"]["data_offsets"] == nlohmann::json::array({0, 24}));
  CHECK(header["a.bias"]["dtype"] == "BF16");
  CHECK(header["a.bias"]["data_offsets"] == nlohmann::json::array({24, 28}));
  CHECK(header["steps"]["shape"] == nlohmann::json::array());
  CHECK(bytes.size() == 8 + length + 24 + 4 + 8 + 3);
  float third;
  std::memcpy(&third, bytes.data() + 8 + length + 8, 4);
  CHECK(third == 2.0f);  // little-endian F32, row-major
  check_same(decode_safetensors(bytes, "x"), sample_tensors());
}

TEST_CASE("PyTorch zip files written by mpt read back through mpt's own unpickler", "[fast][io]") {
  const std::string dir = mpt::testing::scratch_dir("weights-torch");
  write_weights(dir + "/w.pt", sample_tensors(), "torch");
  check_same(read_weights(dir + "/w.pt"), sample_tensors());
  write_weights(dir + "/w.safetensors", sample_tensors(), "safetensors");
  check_same(read_weights(dir + "/w.safetensors"), sample_tensors());
  mpt::write_file_atomically(dir + "/junk.bin", "hello, weights");
  CHECK_THROWS_WITH(read_weights(dir + "/junk.bin"), Catch::Contains("junk.bin: byte 0: not a safetensors file"));
  mpt::write_file_atomically(dir + "/bad.pt", "PK\x03\x04 truncated zip");
  CHECK_THROWS_WITH(read_weights(dir + "/bad.pt"), Catch::Contains("bad.pt: not a PyTorch zip file"));
}

TEST_CASE("malformed safetensors name the tensor and the byte or field that is wrong", "[fast][io]") {
  const std::string good = R"({"x":{"dtype":"F32","shape":[2],"data_offsets":[0,8]}})";
  CHECK(decode_safetensors(with_header(good, std::string(8, '\0')), "f").size() == 1);
  auto error_of = [](const std::string& bytes) {
    try {
      decode_safetensors(bytes, "f.safetensors");
    } catch (const mpt::Error& e) {
      return std::string(e.what());
    }
    return std::string("no error");
  };
  CHECK_THAT(error_of("abc"), Catch::Contains("3 bytes"));
  CHECK_THAT(error_of(with_header(good, std::string(8, '\0')).substr(0, 20)), Catch::Contains("byte 0: header length"));
  CHECK_THAT(error_of(with_header(good, std::string(7, '\0'))), Catch::Contains("run past the file's 7 data bytes"));
  CHECK_THAT(error_of(with_header(good, std::string(9, '\0'))), Catch::Contains("1 bytes after the last tensor"));
  CHECK_THAT(error_of(with_header("{\"x\":", "")), Catch::Contains("not valid JSON"));
  CHECK_THAT(error_of(with_header(R"({"x":{"dtype":"F17","shape":[2],"data_offsets":[0,8]}})", std::string(8, '\0'))),
             Catch::Contains("tensor 'x': dtype \"F17\""));
  CHECK_THAT(error_of(with_header(R"({"x":{"dtype":"F32","shape":[3],"data_offsets":[0,8]}})", std::string(8, '\0'))),
             Catch::Contains("hold 8 bytes; F32 [3] needs 12"));
  CHECK_THAT(error_of(with_header(R"({"x":{"dtype":"F32","shape":[1],"data_offsets":[4,8]}})", std::string(8, '\0'))),
             Catch::Contains("tensor 'x' starts at data byte 4, expected 0 (a hole)"));
  CHECK_THAT(error_of(with_header(R"({"x":{"dtype":"F32","shape":[2],"data_offsets":[0,8]},)"
                                  R"("y":{"dtype":"F32","shape":[1],"data_offsets":[4,8]}})",
                                  std::string(8, '\0'))),
             Catch::Contains("(overlaps the previous tensor)"));
  CHECK_THAT(error_of(with_header(R"({"__metadata__":{"n":3}})", "")),
             Catch::Contains("__metadata__.n: expected a string"));
}

TEST_CASE("init_from loads by name, maps HF BertModel names, keeps new heads, rejects shape mismatches", "[fast][io]") {
  mpt::data::SampleShape text;
  text.seq_len = 16, text.vocab_size = 50, text.num_classes = 3;
  mpt::models::ModelConfig config;
  config.name = "bert-tiny";
  config.options.set("model.head", std::string("classification"));
  mpt::models::Model model = mpt::models::build_model(config, text, mpt::precision::ModulePolicy());

  // A Hugging Face BertModel file: no "bert." prefix, no classifier.
  NamedTensorList bare;
  for (const auto& item : model->named_parameters())
    if (item.key().rfind("bert.", 0) == 0)
      bare.emplace_back(item.key().substr(5), torch::full_like(item.value(), 0.25));
  bare.emplace_back("cls.predictions.bias", torch::zeros({50}));
  // Without the family's base prefix the base model's names match nothing of the model's; with it, all of them.
  CHECK_THROWS_WITH(init_from_weights(*model, bare, "hf.safetensors"), Catch::Contains("none of its"));
  const std::string& base_prefix = mpt::models::model_family("bert-tiny").hf_base_prefix;
  CHECK(base_prefix == "bert");
  const InitReport report = init_from_weights(*model, bare, "hf.safetensors", {}, base_prefix);
  CHECK(report.loaded == static_cast<int64_t>(bare.size()) - 1);
  CHECK(report.fresh == std::vector<std::string>{"classifier.weight", "classifier.bias"});
  CHECK(report.unused == std::vector<std::string>{"cls.predictions.bias"});
  CHECK(model->named_parameters()["bert.encoder.layer.1.output.dense.weight"].eq(0.25).all().item<bool>());
  CHECK_THAT(describe(report), Catch::Contains("2 kept their initialisation (classifier.weight, classifier.bias)"));

  NamedTensorList wrong = {{"bert.pooler.dense.weight", torch::zeros({4, 4})}};
  CHECK_THROWS_WITH(init_from_weights(*model, wrong, "w.pt"),
                    Catch::Contains("w.pt: tensor 'bert.pooler.dense.weight' has shape [4, 4], the model's "
                                    "'bert.pooler.dense.weight' is [128, 128]"));
  NamedTensorList unrelated = {{"conv1.weight", torch::zeros({1})}};
  CHECK_THROWS_WITH(init_from_weights(*model, unrelated, "r.pt"), Catch::Contains("none of its 1 tensor names match"));
}
