// A Hugging Face config.json is bounded before anything is allocated: each size key has a ceiling, named with the
// file when it is crossed, and a model whose parameters alone outgrow the machine is refused with its size.
#include <catch2/catch.hpp>

#include <fstream>

#include "common/error.h"
#include "models/hf_config.h"
#include "tests/support/helpers.h"

using namespace mpt::testing;

namespace {

std::string config_with(const std::string& key, const std::string& value) {
  nlohmann::json config = {{"model_type", "bert"},           {"vocab_size", 30522},      {"hidden_size", 128},
                           {"num_hidden_layers", 2},         {"num_attention_heads", 2}, {"intermediate_size", 512},
                           {"max_position_embeddings", 512}, {"type_vocab_size", 2}};
  config[key] = nlohmann::json::parse(value);
  const std::string dir = scratch_dir("hf-limits-" + key);
  std::ofstream(dir + "/config.json") << config.dump();
  return dir;
}

}  // namespace

TEST_CASE("every size in an HF config.json has a ceiling, and crossing it names the file and the key",
          "[fast][models]") {
  const std::vector<std::pair<std::string, std::string>> hostile = {{"hidden_size", "1000000000"},
                                                                    {"hidden_size", "2147483648"},
                                                                    {"intermediate_size", "2147483648"},
                                                                    {"max_position_embeddings", "2147483648"},
                                                                    {"type_vocab_size", "2147483648"},
                                                                    {"num_hidden_layers", "1000000"},
                                                                    {"vocab_size", "-3"},
                                                                    {"num_attention_heads", "1.5"}};
  for (const auto& [key, value] : hostile) {
    INFO(key << " = " << value);
    const std::string dir = config_with(key, value);
    CHECK_THROWS_WITH(mpt::models::read_hf_bert_config(dir), Catch::Contains(dir + "/config.json") &&
                                                                 Catch::Contains("key '" + key + "'") &&
                                                                 Catch::Contains("expected a positive integer up to"));
  }
}

TEST_CASE("sizes each within their ceiling but together beyond this machine's memory are refused with the count",
          "[fast][models]") {
  // 512 layers of width 65536: ~2.6e13 parameters, more than any machine this runs on holds.
  const std::string dir = config_with("hidden_size", "65536");
  std::ofstream(dir + "/config.json") << nlohmann::json{{"model_type", "bert"},        {"vocab_size", 30522},
                                                        {"hidden_size", 65536},        {"num_hidden_layers", 512},
                                                        {"num_attention_heads", 1024}, {"intermediate_size", 262144}}
                                             .dump();
  CHECK_THROWS_WITH(mpt::models::read_hf_bert_config(dir),
                    Catch::Contains(dir + "/config.json") && Catch::Contains("GiB of memory"));
}
