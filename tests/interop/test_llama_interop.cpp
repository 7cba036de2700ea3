// mpt's decoder against transformers and tokenizers: LlamaForCausalLM's parameter names, shapes and counts for both
// presets; a random model transformers saves loads through model.init_from and gives its logits; the tokenizer.json
// reader gives the library's ids on every line of the corpus and on hard cases, for each pre-tokenizer scheme.
#include <catch2/catch.hpp>

#include <filesystem>
#include <fstream>

#include "data/tokenizer.h"
#include "io/weights.h"
#include "models/llama.h"
#include "models/registry.h"
#include "tests/support/helpers.h"

using namespace mpt;
using testing::source_path;

namespace {

data::SampleShape causal_sample(int64_t vocab, int64_t seq_len) {
  data::SampleShape sample;
  sample.seq_len = seq_len, sample.vocab_size = vocab, sample.causal = true;
  return sample;
}

std::string write_config(const std::string& dir, const nlohmann::ordered_json& config) {
  std::filesystem::create_directories(dir);
  std::ofstream(dir + "/config.json") << config.dump(2);
  return dir + "/config.json";
}

// The hard cases beside the corpus: every Unicode category, separators, digits, long runs, special tokens.
std::vector<std::string> hard_texts() {
  return {
      "line\u2028separator and paragraph\u2029separator, NEL\u0085and VT\u000B and FS\u001C",
      "emoji \U0001FAE8 \U0001FA77 \U0001F9CC, flags \U0001F1EB\U0001F1F7, ZWJ \U0001F468\u200D\U0001F469",
      "CJK \u4E2D\u6587\u5B57 ext B \U00020000 kana \u3072\u3089\u304C\u306A hangul \uD55C\uAD6D\uC5B4",
      "accents Ca\u0301fe\u0301 \u00C7a va? na\u00EFve \u00C5ngstr\u00F6m \u1E9E \u0130stanbul \u00DF \uFB01",
      "controls a\u0001b\u0007c\td\re\u000Cg\u00ADi \u200Bzero\uFEFFbom and private use \uE000\U000F0000",
      "numbers 1234567 \u0661\u0662\u0663 \u2167 \u00BD \u2460 3.14159 1,000,000 0x1F",
      "spaces\u00A0nbsp\u2003em\u3000ideographic\u202Fnarrow   triple\t\ttabs  \n\n  newlines \r\n crlf",
      "I'm you're we've they'll she'd IT'S Don'T 's 't",
      "special <|endoftext|> in text and <|begin_of_text|>twice<|endoftext|><|endoftext|> and <sep> sep  <sep>x",
      "single word: word words sword word_ word.",
      std::string(3000, 'a') + " " + std::string(2000, ' ') + "b",
      "Greek \u039A\u03B1\u03BB\u03B7\u03BC\u03AD\u03C1\u03B1 Cyrillic \u041F\u0440\u0438\u0432\u0435\u0442 Arabic "
      "\u0645\u0631\u062D\u0628\u0627 Devanagari \u0928\u092E\u0938\u094D\u0924\u0947 Thai \u0E2A\u0E27\u0E31\u0E2A",
      " leading space",
      "trailing space ",
      "",
      " ",
      "\n",
  };
}

// mpt's ids for every corpus line and hard case equal the library's, for the tokenizer.json at `path`.
void check_ids(const std::string& path, const std::vector<std::string>& texts) {
  INFO(path);
  const auto tokenizer = data::read_tokenizer_json(path);
  nlohmann::json cases = nlohmann::json::array();
  for (const auto& text : texts) cases.push_back({{"text", text}, {"ids", tokenizer->encode(text)}});
  const std::string cases_path = testing::scratch_dir("llama_tokenizer_cases") + "/cases.json";
  std::ofstream(cases_path) << cases.dump(-1, ' ', false, nlohmann::json::error_handler_t::strict);
  const testing::CommandResult result =
      testing::run_python(source_path("tests/interop/llama_reference.py") + " ids " + path + " " + cases_path);
  INFO(result.output);
  CHECK(result.exit_code == 0);
}

}  // namespace

TEST_CASE("llama-tiny and llama-135m have LlamaForCausalLM's parameter names, shapes and counts",
          "[slow][interop][models]") {
  if (const std::string missing = testing::python_missing("transformers"); !missing.empty()) MPT_SKIP(missing);
  for (const auto& [name, vocab] : {std::pair<std::string, int64_t>{"llama-tiny", 8192}, {"llama-135m", 49152}}) {
    INFO(name);
    models::LlamaConfig config = models::llama_preset(name);
    config.vocab_size = vocab;
    const std::string path = write_config(testing::scratch_dir("llama_names"), models::hf_llama_config(config));
    const testing::CommandResult result =
        testing::run_python(source_path("tests/interop/llama_reference.py") + " names " + path);
    REQUIRE(result.exit_code == 0);
    const nlohmann::json reference = nlohmann::json::parse(result.output.substr(result.output.find('{')));
    models::ModelConfig model_config;
    model_config.name = name;
    torch::NoGradGuard no_grad;
    const models::Model model = models::build_model(model_config, causal_sample(vocab, 16), precision::ModulePolicy());
    int64_t count = 0;
    std::map<std::string, std::vector<int64_t>> mine;
    for (const auto& item : model->named_parameters()) {
      mine[item.key()] = item.value().sizes().vec();
      count += item.value().numel();
    }
    CHECK(count == reference["count"].get<int64_t>());
    CHECK(mine == reference["parameters"].get<std::map<std::string, std::vector<int64_t>>>());
  }
}

TEST_CASE("an HF Llama folder loads through model.init_from and gives transformers' logits, tied or not",
          "[slow][interop][models]") {
  if (const std::string missing = testing::python_missing("transformers"); !missing.empty()) MPT_SKIP(missing);
  for (const bool tied : {false, true}) {
    INFO("tied " << tied);
    models::LlamaConfig config = models::llama_preset("llama-tiny");
    config.vocab_size = 320, config.hidden = 64, config.intermediate = 96, config.layers = 2, config.heads = 4;
    config.kv_heads = 2, config.head_dim = 16, config.rope_theta = 5000.0, config.rms_norm_eps = 1e-6;
    config.tie_embeddings = tied;
    const std::string dir = testing::scratch_dir("llama_import");
    write_config(dir + "/spec", models::hf_llama_config(config));
    REQUIRE(testing::run_python(source_path("tests/interop/llama_reference.py") + " save-random " + dir + "/hf " + dir +
                                "/spec/config.json 7")
                .exit_code == 0);
    models::ModelConfig model_config;
    model_config.name = "llama";
    model_config.options.set("model.hf_config", dir + "/hf");
    const models::Model model = models::build_model(model_config, causal_sample(320, 24), precision::ModulePolicy());
    const io::InitReport report =
        io::init_from_weights(*model, io::read_weights(dir + "/hf"), dir + "/hf", {}, "model");
    CHECK(report.fresh.empty());
    model->eval();
    torch::NoGradGuard no_grad;
    torch::manual_seed(1);
    const torch::Tensor ids = torch::randint(0, 320, {2, 24});
    const torch::Tensor logits = model->forward(ids);
    std::ofstream(dir + "/io.safetensors", std::ios::binary)
        << io::encode_safetensors({{"input_ids", ids.to(torch::kInt)}, {"logits", logits}});
    const testing::CommandResult result = testing::run_python(source_path("tests/interop/llama_reference.py") +
                                                              " logits " + dir + "/hf " + dir + "/io.safetensors 1e-5");
    INFO(result.output);
    CHECK(result.exit_code == 0);
  }
}

TEST_CASE("tokenizer.json BPE gives tokenizers' ids over the whole corpus and the hard cases, every scheme",
          "[slow][interop][data]") {
  if (const std::string missing = testing::python_missing("tokenizers"); !missing.empty()) MPT_SKIP(missing);
  const std::string corpus = source_path("data/corpus/fortunes");
  const std::string shipped = source_path("data/fortunes-bpe/tokenizer.json");
  REQUIRE(std::filesystem::is_regular_file(shipped));  // scripts/setup.sh trains it
  std::vector<std::string> texts = hard_texts();
  for (const auto& file : data::corpus_files(corpus))
    data::for_each_utf8_line(file, [&](std::string& line, int64_t) { texts.push_back(line); });
  REQUIRE(texts.size() > 10000);
  check_ids(shipped, texts);
  const std::string variants = testing::scratch_dir("llama_tokenizer_variants");
  REQUIRE(
      testing::run_python(source_path("tests/interop/llama_reference.py") + " tokenizers " + variants + " " + corpus)
          .exit_code == 0);
  for (const char* name : {"llama3", "smollm", "gpt2_prefix", "fallback"})
    check_ids(variants + "/" + name + "/tokenizer.json", texts);
}

TEST_CASE(
    "a trained decoder exported with --format hf loads in transformers with mpt's logits, tokenizer and a "
    "working text-generation pipeline",
    "[slow][interop][cli][models]") {
  if (const std::string missing = testing::python_missing("transformers"); !missing.empty()) MPT_SKIP(missing);
  const std::string dir = testing::scratch_dir("llama_export");
  const testing::CommandResult trained =
      testing::run_mpt({"train", source_path("configs/llama_tiny_corpus.yaml"), "data.seq_len=64", "data.batch_size=8",
                        "data.test_limit=8", "train.max_steps=6", "--run-dir", dir + "/run"});
  INFO(trained.output);
  REQUIRE(trained.exit_code == 0);
  const testing::CommandResult exported =
      testing::run_mpt({"export", dir + "/run", "--format", "hf", "--out", dir + "/hf"});
  INFO(exported.output);
  REQUIRE(exported.exit_code == 0);
  const nlohmann::json config = testing::read_json(dir + "/hf/config.json");
  CHECK(config["architectures"][0] == "LlamaForCausalLM");
  CHECK(config["tie_word_embeddings"] == true);
  CHECK(config["eos_token_id"] == 0);  // <|endoftext|>, the BPE's first token

  // mpt's logits from the exported weights, then transformers' from the folder.
  models::ModelConfig model_config;
  model_config.name = "llama-tiny";
  const models::Model model = models::build_model(model_config, causal_sample(8192, 64), precision::ModulePolicy());
  io::init_from_weights(*model, io::read_weights(dir + "/hf"), dir + "/hf", {}, "model");
  model->eval();
  torch::NoGradGuard no_grad;
  const auto tokenizer = data::read_tokenizer_json(dir + "/hf/tokenizer.json");
  const std::vector<int32_t> prompt = tokenizer->encode("Q: What is a fortune? A: It is");
  const torch::Tensor ids = torch::tensor(prompt, torch::kInt).unsqueeze(0).to(torch::kLong);
  std::ofstream(dir + "/io.safetensors", std::ios::binary)
      << io::encode_safetensors({{"input_ids", ids.to(torch::kInt)}, {"logits", model->forward(ids)}});
  const std::string reference = source_path("tests/interop/llama_reference.py");
  const testing::CommandResult logits =
      testing::run_python(reference + " logits " + dir + "/hf " + dir + "/io.safetensors 1e-5");
  INFO(logits.output);
  CHECK(logits.exit_code == 0);
  const testing::CommandResult generated =
      testing::run_python(reference + " generate " + dir + "/hf 'Q: What is a fortune? A: It is'");
  INFO(generated.output);
  REQUIRE(generated.exit_code == 0);
  const nlohmann::json answer = nlohmann::json::parse(generated.output.substr(generated.output.rfind("{\"text\"")));
  CHECK(answer["prompt_ids"].get<std::vector<int32_t>>() == prompt);
  CHECK(answer["text"].get<std::string>().size() > std::string("Q: What is a fortune? A: It is").size());
}
