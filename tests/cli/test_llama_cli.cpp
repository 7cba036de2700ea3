// The decoder end to end on the fortunes with the shipped byte-level BPE: every precision recipe trains and reports
// perplexity; ZeRO-1 on 2 ranks gives the unsharded losses bit for bit; a run killed with -9 resumes bit-exactly.
#include <catch2/catch.hpp>

#include <chrono>
#include <cmath>
#include <filesystem>
#include <thread>

#include "tests/support/helpers.h"

using namespace mpt::testing;
namespace fs = std::filesystem;

namespace {

const std::string kSpec = source_path("configs/llama_tiny_corpus.yaml");

std::vector<std::string> job(const std::string& dir, std::vector<std::string> extra) {
  std::vector<std::string> args = {"train",
                                   kSpec,
                                   "data.seq_len=64",
                                   "data.batch_size=8",
                                   "data.test_limit=16",
                                   "train.max_steps=8",
                                   "train.log_every_steps=1",
                                   "train.eval_every_steps=8",
                                   "checkpoint.every_steps=4",
                                   "--run-dir",
                                   dir};
  args.insert(args.end(), extra.begin(), extra.end());
  return args;
}

void run_ok(const std::vector<std::string>& args) {
  const CommandResult result = run_mpt(args);
  INFO(result.output);
  REQUIRE(result.exit_code == 0);
}

void check_same_losses(const std::string& a, const std::string& b) {
  const auto left = metric_series(a, "loss"), right = metric_series(b, "loss");
  REQUIRE(left.size() == right.size());
  REQUIRE(!left.empty());
  for (size_t i = 0; i < left.size(); ++i) {
    INFO("step " << left[i].first);
    CHECK(left[i].second == right[i].second);  // bit for bit
  }
}

}  // namespace

TEST_CASE("llama-tiny trains on causal_lm under every recipe and reports perplexity", "[slow][cli][models]") {
  REQUIRE(fs::is_regular_file(source_path("data/fortunes-bpe/tokenizer.json")));  // scripts/setup.sh trains it
  const std::vector<std::vector<std::string>> recipes = {
      {"precision.mode=fp32"},
      {"precision.mode=mixed"},
      {"precision.mode=mixed", "precision.strategy=master_weights"},
      {"precision.mode=fp8", "precision.fp8.recipe=delayed"},
      {"precision.mode=fp8", "precision.fp8.recipe=current"},
      {"precision.mode=fp8", "precision.fp8.recipe=mxfp8"},
      {"precision.mode=mixed", "memory.activation_checkpointing=selective", "data.document_attention=true"},
  };
  for (const auto& recipe : recipes) {
    INFO(recipe[0] << " " << recipe.back());
    const std::string dir = scratch_dir("llama-recipe");
    run_ok(job(dir, recipe));
    const auto losses = metric_series(dir, "loss");
    REQUIRE(losses.size() == 8);
    CHECK(std::isfinite(losses.back().second));
    CHECK(losses.back().second < losses.front().second);  // it learns
    const auto evals = read_jsonl(dir + "/metrics.jsonl");
    const nlohmann::json eval = evals.back()["eval"];
    CHECK(eval["perplexity"].get<double>() == Approx(std::exp(eval["loss"].get<double>())));
  }
}

TEST_CASE("llama-tiny with ZeRO-1 on 2 ranks trains bit for bit like unsharded data parallelism",
          "[slow][cli][dist][models]") {
  const std::string plain = scratch_dir("llama-zero-plain"), sharded = scratch_dir("llama-zero-sharded");
  run_ok(job(plain, {"precision.strategy=master_weights", "--nproc", "2"}));
  run_ok(job(sharded, {"precision.strategy=master_weights", "distributed.shard_optimizer=true", "--nproc", "2"}));
  check_same_losses(plain, sharded);
}

TEST_CASE("llama-tiny killed with -9 after a checkpoint resumes bit-exactly", "[slow][cli][models]") {
  const std::string whole = scratch_dir("llama-whole"), cut = scratch_dir("llama-cut");
  run_ok(job(whole, {"train.max_steps=12"}));
  const int pid = start_mpt(job(cut, {"train.max_steps=12"}), cut + ".log");
  const std::string checkpoint = cut + "/checkpoints/step-000000004.mpt";
  for (int i = 0; i < 600 && !fs::exists(checkpoint); ++i) std::this_thread::sleep_for(std::chrono::milliseconds(100));
  REQUIRE(fs::exists(checkpoint));
  kill_hard(pid);
  run_ok(job(cut, {"train.max_steps=12"}));
  check_same_losses(whole, cut);
}
