// `mpt train` with BERT masked-LM on the real corpus scripts/setup.sh provides, and its bad-input errors.
#include <catch2/catch.hpp>

#include <filesystem>
#include <fstream>

#include "tests/support/helpers.h"

using namespace mpt::testing;

namespace {

const std::string kTinyMlm = source_path("configs/bert_tiny_mlm.yaml");

std::vector<std::string> real_data_overrides() {
  return {"data.root=" + source_path("data/corpus/fortunes"),
          "data.vocab=" + source_path("data/bert-base-uncased/vocab.txt")};
}

}  // namespace

TEST_CASE("bert-tiny masked-LM trains on the fortunes corpus and its loss falls", "[slow][cli]") {
  const std::string dir = scratch_dir("cli-bert-tiny");
  std::vector<std::string> args = {"train",
                                   kTinyMlm,
                                   "data.seq_len=64",
                                   "data.batch_size=16",
                                   "data.train_limit=512",
                                   "data.test_limit=64",
                                   "train.max_steps=60",
                                   "train.log_every_steps=10",
                                   "schedule.warmup_steps=10",
                                   "--run-dir",
                                   dir};
  for (const auto& o : real_data_overrides()) args.push_back(o);
  CommandResult run = run_mpt(args);
  INFO(run.output);
  REQUIRE(run.exit_code == 0);
  const nlohmann::json summary = read_json(dir + "/summary.json");
  CHECK(summary["status"] == "completed");
  CHECK(summary["precision"] == "mixed_bf16");
  const auto loss = metric_series(dir, "loss");
  REQUIRE(loss.size() == 6);
  CHECK(loss.back().second < loss.front().second - 1.0);    // from ~10.3 (ln 30522) down by more than a nat
  CHECK(summary["eval"]["accuracy"].get<double>() > 0.02);  // masked-token accuracy: the frequent words first
  CHECK(std::filesystem::exists(dir + "/checkpoints/step-000000060.mpt"));

  // Fine-tuning: the topics classifier starts from this run's encoder; pooler and classifier start fresh.
  const std::string tune_dir = scratch_dir("cli-bert-tiny-topics");  // fresh, or --resume auto would refuse it
  CommandResult tune =
      run_mpt({"train", source_path("configs/bert_tiny_topics.yaml"),
               "model.init_from=" + dir + "/checkpoints/step-000000060.mpt",
               "data.root=" + source_path("data/fortune_topics"), real_data_overrides()[1], "data.seq_len=64",
               "data.train_limit=256", "data.test_limit=128", "train.max_steps=16", "--run-dir", tune_dir});
  INFO(tune.output);
  REQUIRE(tune.exit_code == 0);
  CHECK_THAT(tune.output,
             Catch::Contains("loaded 37 tensors; 4 kept their initialisation (bert.pooler.dense.weight, "
                             "bert.pooler.dense.bias, classifier.weight, classifier.bias); 5 in the file unused"));
  const nlohmann::json tuned = read_json(tune_dir + "/summary.json");
  CHECK(tuned["eval"]["samples"] == 128);
  CHECK(tuned["eval"]["accuracy"].get<double>() >= 0.0);
}

TEST_CASE("text data errors name the key, file and byte offset", "[fast][cli]") {
  const std::string dir = scratch_dir("cli-bert-errors");
  std::filesystem::create_directories(dir + "/corpus");
  std::ofstream(dir + "/corpus/a.txt", std::ios::binary) << "fine text\nbroken \xFF here\n";
  const std::string vocab = "data.vocab=" + source_path("data/bert-base-uncased/vocab.txt");
  CommandResult bad_bytes =
      run_mpt({"train", kTinyMlm, "data.root=" + dir + "/corpus", vocab, "--run-dir", dir + "/run"});
  CHECK(bad_bytes.exit_code == 1);
  CHECK_THAT(bad_bytes.output, Catch::Contains("a.txt: byte offset 17 (line 2): invalid UTF-8"));

  CommandResult no_vocab =
      run_mpt({"train", kTinyMlm, "data.root=" + dir + "/corpus", "data.vocab=" + dir + "/none.txt"});
  CHECK(no_vocab.exit_code == 2);
  CHECK_THAT(no_vocab.output, Catch::Contains("data.vocab = " + dir + "/none.txt: no such file"));

  CommandResult mismatch = run_mpt({"train", kTinyMlm, "data.name=fashion_mnist", "data.root=" + kFashionMnistRoot});
  CHECK(mismatch.exit_code == 2);
  CHECK_THAT(mismatch.output, Catch::Contains("BERT reads token sequences; expected data.name: text_corpus"));
}
