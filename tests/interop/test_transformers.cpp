// mpt's BERT against the real transformers: the packaged all-MiniLM-L6-v2 (a pretrained 6-layer, 12-head BERT)
// loads into mpt from its config.json and model.safetensors and gives transformers' hidden states, in FP32 and
// under BF16 autocast; a trained mpt BERT exported as a Hugging Face folder loads with from_pretrained and gives
// mpt's logits.
#include <catch2/catch.hpp>

#include <filesystem>
#include <fstream>

#include "data/wordpiece.h"
#include "io/checkpoint.h"
#include "io/weights.h"
#include "models/hf_config.h"
#include "models/bert.h"
#include "models/registry.h"
#include "precision/autocast.h"
#include "tests/support/helpers.h"

using namespace mpt;
using testing::source_path;

namespace {

const std::string kMiniLm = source_path("data/all-MiniLM-L6-v2");
const std::vector<std::string> kDefaultFp32{"*LayerNorm", "cls.predictions", "classifier"};

// Two sequences of real token ids; the second ends in [PAD]s, which both sides mask.
torch::Tensor sample_ids() {
  torch::Tensor ids = torch::randint(1000, 20000, {2, 24}, torch::kLong);
  ids.index_put_({torch::indexing::Slice(), 0}, 101);  // [CLS]
  ids.index_put_({0, 23}, 102);                        // [SEP]
  ids.index_put_({1, 15}, 102);
  ids.index_put_({1, torch::indexing::Slice(16, torch::indexing::None)}, 0);  // [PAD]
  return ids;
}

int compare(const std::string& mode, const std::string& model_dir, const io::NamedTensorList& io, double tolerance) {
  const std::string io_path = testing::scratch_dir("hf-" + mode) + "/io.safetensors";
  io::write_weights(io_path, io, "safetensors");
  const testing::CommandResult result =
      testing::run_python(source_path("tests/interop/hf_reference.py") + " " + mode + " " + model_dir + " " + io_path +
                          " " + std::to_string(tolerance));
  UNSCOPED_INFO(result.output);
  return result.exit_code;
}

// `mpt train SPEC OVERRIDES` for a few steps and `mpt export --format hf`; returns the folder.
std::string exported_folder(const std::string& name, const std::string& spec, const std::string& data_root,
                            const std::vector<std::string>& overrides = {}) {
  const std::string dir = testing::scratch_dir(name);
  std::vector<std::string> args = {"train",
                                   source_path(spec),
                                   "train.max_steps=3",
                                   "train.epochs=1",
                                   "data.batch_size=4",
                                   "data.test_limit=8",
                                   "data.root=" + source_path(data_root),
                                   "data.vocab=" + source_path("data/bert-base-uncased/vocab.txt"),
                                   "--run-dir",
                                   dir + "/run"};
  args.insert(args.end(), overrides.begin(), overrides.end());
  const testing::CommandResult train = testing::run_mpt(args);
  INFO(train.output);
  REQUIRE(train.exit_code == 0);
  const testing::CommandResult exported =
      testing::run_mpt({"export", dir + "/run", "--format", "hf", "--out", dir + "/hf"});
  INFO(exported.output);
  REQUIRE(exported.exit_code == 0);
  return dir + "/hf";
}

}  // namespace

TEST_CASE("all-MiniLM-L6-v2 loads into mpt and gives transformers' hidden states", "[slow][interop]") {
  if (const std::string missing = testing::python_missing("transformers safetensors"); !missing.empty())
    MPT_SKIP(missing);
  REQUIRE(std::filesystem::exists(kMiniLm + "/model.safetensors"));  // scripts/setup.sh links it
  models::BertConfig config = models::read_hf_bert_config(kMiniLm);
  CHECK(config.layers == 6);
  CHECK(config.hidden == 384);
  CHECK(config.heads == 12);  // not hidden / 64: the head count is the config's
  config.dropout = 0.0;
  models::BertModel bert(config, /*with_pooler=*/true, precision::ModulePolicy(kDefaultFp32), "");
  const io::InitReport report =
      io::init_from_weights(*bert, io::read_weights(kMiniLm + "/model.safetensors"), "model.safetensors", {}, "bert");
  CHECK(report.fresh.empty());
  bert->eval();
  torch::NoGradGuard no_grad;
  torch::manual_seed(0);
  const torch::Tensor ids = sample_ids();
  const torch::Tensor fp32 = bert->forward(ids);
  CHECK(compare("hidden", kMiniLm, {{"input_ids", ids}, {"hidden", fp32}}, 1e-4) == 0);
  torch::Tensor bf16;
  {
    precision::AutocastScope autocast(torch::kCPU, torch::kBFloat16);
    bf16 = bert->forward(ids).to(torch::kFloat);
  }
  // BF16 keeps 8 bits of mantissa: six layers of BF16 GEMMs stay within a few percent of the largest state.
  CHECK(compare("hidden", kMiniLm, {{"input_ids", ids}, {"hidden", bf16}}, 0.05) == 0);
}

TEST_CASE("an mpt BERT exported as a Hugging Face folder loads with from_pretrained and gives mpt's logits",
          "[slow][interop]") {
  if (const std::string missing = testing::python_missing("transformers safetensors"); !missing.empty())
    MPT_SKIP(missing);
  const std::string folder =
      exported_folder("hf-export", "configs/bert_tiny_mlm.yaml", "data/corpus/fortunes", {"model.heads=4"});
  const nlohmann::json config = testing::read_json(folder + "/config.json");
  CHECK(config["num_attention_heads"] == 4);
  CHECK(config["architectures"][0] == "BertForMaskedLM");

  models::ModelConfig model_config;
  model_config.name = "bert-tiny";
  model_config.options.set("model.heads", int64_t{4});
  model_config.dropout = 0.0;
  data::SampleShape shape;
  shape.seq_len = 24;
  shape.vocab_size = 30522;
  shape.masked_fraction = 0.15;
  models::Model model = models::build_model(model_config, shape, precision::ModulePolicy(kDefaultFp32));
  io::init_from_weights(*model, io::read_weights(folder + "/model.safetensors"), "model.safetensors", {}, "bert");
  model->eval();
  torch::NoGradGuard no_grad;
  torch::manual_seed(1);
  const torch::Tensor ids = sample_ids();
  CHECK(compare("mlm", folder, {{"input_ids", ids}, {"logits", model->forward(ids)}}, 1e-4) == 0);
}

namespace {

nlohmann::json pipeline_answer(const std::string& task, const std::string& folder, const std::string& text) {
  const testing::CommandResult run =
      testing::run_python(source_path("tests/interop/hf_reference.py") + " " + task + " " + folder + " '" + text + "'");
  INFO(run.output);
  REQUIRE(run.exit_code == 0);
  return nlohmann::json::parse(run.output.substr(run.output.rfind("{\"answer\"")))["answer"];
}

}  // namespace

TEST_CASE("an exported masked-LM folder is complete: AutoTokenizer gives the training ids, fill-mask real tokens",
          "[slow][interop]") {
  if (const std::string missing = testing::python_missing("transformers"); !missing.empty()) MPT_SKIP(missing);
  const std::string folder = exported_folder("hf-complete-mlm", "configs/bert_tiny_mlm.yaml", "data/corpus/fortunes");
  // Another model's files in the folder (a tokenizer.json wins over vocab.txt in AutoTokenizer): refused, then
  // replaced with --force, so that the checks below read only what this export wrote.
  std::ofstream(folder + "/tokenizer.json") << R"({"version": "1.0", "model": {"type": "WordLevel", "vocab": {}}})";
  std::ofstream(folder + "/pytorch_model.bin") << "another model";
  std::ofstream(folder + "/README.md") << "notes";
  const std::string run = std::filesystem::path(folder).parent_path().string() + "/run";
  const testing::CommandResult refused = testing::run_mpt({"export", run, "--format", "hf", "--out", folder});
  CHECK(refused.exit_code == 2);
  CHECK_THAT(refused.output, Catch::Contains("already holds files (") && Catch::Contains("tokenizer.json") &&
                                 Catch::Contains("pass --force"));
  const testing::CommandResult forced = testing::run_mpt({"export", run, "--format", "hf", "--out", folder, "--force"});
  INFO(forced.output);
  REQUIRE(forced.exit_code == 0);
  CHECK(!std::filesystem::exists(folder + "/tokenizer.json"));
  CHECK(!std::filesystem::exists(folder + "/pytorch_model.bin"));
  CHECK(std::filesystem::exists(folder + "/README.md"));  // not a file a loader reads: the user's, kept
  for (const char* file : {"vocab.txt", "tokenizer_config.json", "special_tokens_map.json"})
    CHECK(std::filesystem::is_regular_file(folder + "/" + file));
  CHECK(testing::read_json(folder + "/tokenizer_config.json")["do_lower_case"] == true);

  // Every corpus line, tokenised by mpt as training does, against AutoTokenizer on the folder.
  const data::WordPieceTokenizer tokenizer(data::Vocabulary::load(folder + "/vocab.txt"), /*lowercase=*/true);
  nlohmann::json cases = nlohmann::json::array();
  for (const auto& entry : std::filesystem::directory_iterator(source_path("data/corpus/fortunes")))
    data::for_each_utf8_line(entry.path().string(), [&](std::string& line, int64_t) {
      if (!line.empty()) cases.push_back({{"text", line}, {"ids", tokenizer.encode(line)}});
    });
  REQUIRE(cases.size() > 10000);
  const std::string path = testing::scratch_dir("hf-complete-cases") + "/cases.json";
  std::ofstream(path) << cases.dump();
  const testing::CommandResult same =
      testing::run_python(source_path("tests/interop/hf_reference.py") + " autotokenizer " + folder + " " + path);
  INFO(same.output);
  CHECK(same.exit_code == 0);

  const nlohmann::json answers = pipeline_answer("fill-mask", folder, "the meaning of [MASK] is unclear.");
  REQUIRE(answers.size() == 5u);
  const data::Vocabulary vocabulary = data::Vocabulary::load(folder + "/vocab.txt");
  for (const auto& answer : answers) {
    const std::string token = answer["token_str"];
    CHECK(!token.empty());
    CHECK(vocabulary.token(answer["token"].get<int64_t>()).find(token) != std::string::npos);
  }
}

TEST_CASE("an exported classifier folder names its classes: text-classification says the topic", "[slow][interop]") {
  if (const std::string missing = testing::python_missing("transformers"); !missing.empty()) MPT_SKIP(missing);
  const std::string folder =
      exported_folder("hf-complete-topics", "configs/bert_tiny_topics.yaml", "data/fortune_topics");
  const nlohmann::json config = testing::read_json(folder + "/config.json");
  CHECK(config["id2label"] ==
        nlohmann::json::parse(R"({"0": "computers", "1": "politics", "2": "science", "3": "songs-poems"})"));
  CHECK(config["label2id"]["science"] == 2);
  const nlohmann::json answer = pipeline_answer("text-classification", folder, "The compiler rejected my program.");
  REQUIRE(answer.size() == 1u);
  const std::string label = answer[0]["label"];
  CHECK((label == "computers" || label == "politics" || label == "science" || label == "songs-poems"));
}
