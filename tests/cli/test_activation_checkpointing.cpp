// Activation checkpointing end to end: `mpt train` of BERT-tiny masked-LM on the real corpus with
// memory.activation_checkpointing selective and full logs the losses of none, bit for bit, in a lower training peak,
// and a run interrupted under one mode resumes under another.
#include <catch2/catch.hpp>

#include <map>

#include "tests/support/helpers.h"

using namespace mpt::testing;

namespace {

// Sequences of 128 tokens in batches of 32 with dropout, so that the activations weigh beside the 4 million
// parameters (most of them the word embeddings) and the recomputation must draw the same masks.
std::vector<std::string> job(const std::string& dir, const std::string& mode, std::vector<std::string> extra = {}) {
  std::vector<std::string> args = {"train",
                                   source_path("configs/bert_tiny_mlm.yaml"),
                                   "data.root=" + source_path("data/corpus/fortunes"),
                                   "data.vocab=" + source_path("data/bert-base-uncased/vocab.txt"),
                                   "data.train_limit=1024",
                                   "data.test_limit=64",
                                   "train.max_steps=12",
                                   "train.log_every_steps=1",
                                   "checkpoint.every_steps=6",
                                   "memory.activation_checkpointing=" + mode,
                                   "--run-dir",
                                   dir};
  args.insert(args.end(), extra.begin(), extra.end());
  return args;
}

nlohmann::json train(const std::vector<std::string>& args, const std::string& dir) {
  const CommandResult result = run_mpt(args);
  INFO(result.output);
  REQUIRE((result.exit_code == 0 || result.exit_code == 1));  // 1: stopped by debug.stop_after_steps
  return read_json(dir + "/summary.json");
}

int64_t training_peak(const nlohmann::json& summary) { return summary["memory"]["training_peak_bytes"].get<int64_t>(); }

}  // namespace

TEST_CASE(
    "BERT-tiny trained with selective or full activation checkpointing logs the losses of none bit for bit, "
    "in a lower training peak",
    "[slow][cli][memory]") {
  std::map<std::string, nlohmann::json> summaries;
  std::map<std::string, std::vector<std::pair<int64_t, double>>> losses;
  for (const std::string mode : {"none", "selective", "full"}) {
    const std::string dir = scratch_dir("ckpt-cli-" + mode);
    summaries[mode] = train(job(dir, mode), dir);
    REQUIRE(summaries[mode]["status"] == "completed");
    losses[mode] = metric_series(dir, "loss");
  }
  REQUIRE(losses["none"].size() == 12);
  CHECK(losses["selective"] == losses["none"]);
  CHECK(losses["full"] == losses["none"]);
  CHECK(summaries["selective"]["eval"]["loss"] == summaries["none"]["eval"]["loss"]);
  CHECK(training_peak(summaries["selective"]) < training_peak(summaries["none"]));
  CHECK(training_peak(summaries["full"]) < training_peak(summaries["selective"]));
}

TEST_CASE("a run interrupted without checkpointing resumes with selective checkpointing, its losses unchanged",
          "[slow][cli][memory]") {
  const std::string whole = scratch_dir("ckpt-cli-whole"), resumed = scratch_dir("ckpt-cli-resumed");
  train(job(whole, "none"), whole);
  REQUIRE(train(job(resumed, "none", {"debug.stop_after_steps=6"}), resumed)["status"] == "interrupted");
  const nlohmann::json summary = train(job(resumed, "selective"), resumed);
  CHECK(summary["status"] == "completed");
  CHECK(metric_series(resumed, "loss") == metric_series(whole, "loss"));
}
