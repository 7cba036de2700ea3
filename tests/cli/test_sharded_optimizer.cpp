// ZeRO-1 end to end (distributed.shard_optimizer): `mpt train --nproc 2` over Gloo with each rank keeping half of
// the FP32 masters and AdamW state, against the same job unsharded - the same losses bit for bit, the same
// checkpoint, less memory, and checkpoints that resume on another number of ranks.
#include <catch2/catch.hpp>

#include <chrono>
#include <cstdlib>
#include <ctime>
#include <filesystem>
#include <thread>

#include "io/checkpoint.h"
#include "tests/support/helpers.h"

using namespace mpt::testing;
namespace fs = std::filesystem;

namespace {

const std::string kMixed = source_path("configs/mlp_fmnist_mixed.yaml");

// AdamW, clipping by the global norm and a loss scale that grows: every piece that must stay exactly as unsharded.
// The spec's strategy is autocast (FP32 weights, each its own master); the first test sets BF16 weights with FP32
// masters.
std::vector<std::string> job(const std::string& dir, bool sharded, std::vector<std::string> extra = {}) {
  std::vector<std::string> args = {"train",
                                   kMixed,
                                   "model.hidden_sizes=[2048,2048]",
                                   "optimizer.name=adamw",
                                   "optimizer.weight_decay=0.01",
                                   "train.grad_clip_norm=1.0",
                                   "precision.loss_scale.growth_interval=5",
                                   "train.max_steps=24",
                                   "train.log_every_steps=1",
                                   "data.batch_size=32",
                                   "data.test_limit=1000",
                                   "checkpoint.every_steps=8",
                                   std::string("distributed.shard_optimizer=") + (sharded ? "true" : "false"),
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

// A run that debug.stop_after_steps interrupts (exit 1), leaving its checkpoint.
void run_until(const std::vector<std::string>& args, const std::string& dir) {
  const CommandResult result = run_mpt(args);
  INFO(result.output);
  REQUIRE(read_json(dir + "/summary.json")["status"] == "interrupted");
}

void check_same_losses(const std::string& a, const std::string& b) {
  const auto left = metric_series(a, "loss"), right = metric_series(b, "loss");
  REQUIRE(left.size() == right.size());
  REQUIRE(!left.empty());
  for (size_t i = 0; i < left.size(); ++i) {
    INFO("step " << left[i].first);
    CHECK(left[i].first == right[i].first);
    CHECK(left[i].second == right[i].second);  // bit for bit
  }
}

void check_same_weights(const std::string& a, const std::string& b) {
  const auto left = mpt::io::read_checkpoint_weights(a), right = mpt::io::read_checkpoint_weights(b);
  REQUIRE(left.size() == right.size());
  for (size_t i = 0; i < left.size(); ++i) {
    INFO(left[i].first);
    CHECK(torch::equal(left[i].second, right[i].second));
  }
}

}  // namespace

TEST_CASE(
    "sharded masters and AdamW state on 2 ranks train bit for bit like unsharded data parallelism, in less "
    "memory",
    "[slow][cli][dist][memory]") {
  const std::string plain = scratch_dir("zero-plain"), sharded = scratch_dir("zero-sharded");
  run_ok(job(plain, false, {"precision.strategy=master_weights", "--nproc", "2"}));
  run_ok(job(sharded, true, {"precision.strategy=master_weights", "--nproc", "2"}));
  check_same_losses(plain, sharded);
  const auto scale_plain = metric_series(plain, "loss_scale"), scale_sharded = metric_series(sharded, "loss_scale");
  CHECK(scale_plain == scale_sharded);
  CHECK(scale_plain.back().second > scale_plain.front().second);  // the scale grew: the shared verdict was exercised
  check_same_weights(plain + "/checkpoints/step-000000024.mpt", sharded + "/checkpoints/step-000000024.mpt");
  const nlohmann::json a = read_json(plain + "/summary.json"), b = read_json(sharded + "/summary.json");
  CHECK(b["eval"]["accuracy"] == a["eval"]["accuracy"]);
  // Rank 0 keeps half of the 4 + 8 bytes per parameter (of 5.8 million) of masters and AdamW state.
  CHECK(b["memory"]["training_peak_bytes"].get<double>() < 0.85 * a["memory"]["training_peak_bytes"].get<double>());
}

TEST_CASE(
    "sharded checkpoints reshard: 2 sharded ranks -> 1 process -> 3 sharded ranks resumes exactly as the "
    "unsharded job does",
    "[slow][cli][dist][memory]") {
  const std::string plain = scratch_dir("zero-resume-plain"), sharded = scratch_dir("zero-resume-sharded");
  for (const auto& [dir, shard] : {std::pair{plain, false}, std::pair{sharded, true}}) {
    run_until(job(dir, shard, {"debug.stop_after_steps=8", "--nproc", "2"}), dir);
    run_until(job(dir, shard, {"debug.stop_after_steps=16"}),
              dir);                             // one process: every parameter's state assembled from the two shards
    run_ok(job(dir, shard, {"--nproc", "3"}));  // three ranks cut the one process's file anew
  }
  check_same_losses(plain, sharded);
  CHECK(metric_series(sharded, "loss").size() == 24);
  // Each sharded rank wrote its own shard beside rank 0's main file; the one process wrote one file.
  const std::string checkpoints = sharded + "/checkpoints/";
  CHECK(fs::exists(checkpoints + "step-000000024.shard-2-of-3.mpt"));
  CHECK(!fs::exists(checkpoints + "step-000000016.shard-0-of-1.mpt"));
  CHECK(mpt::io::verify_checkpoint(checkpoints + "step-000000024.mpt") == "");
  check_same_weights(plain + "/checkpoints/step-000000024.mpt", checkpoints + "step-000000024.mpt");
  // A shard gone or replaced by another save's makes the checkpoint unusable, named.
  fs::copy_file(checkpoints + "step-000000024.shard-0-of-3.mpt", checkpoints + "step-000000024.shard-1-of-3.mpt",
                fs::copy_options::overwrite_existing);
  CHECK_THAT(mpt::io::verify_checkpoint(checkpoints + "step-000000024.mpt"),
             Catch::Contains("step-000000024.shard-1-of-3.mpt: not the shard this checkpoint's save wrote"));
  fs::remove(checkpoints + "step-000000024.shard-2-of-3.mpt");
  CHECK_THAT(mpt::io::verify_checkpoint(checkpoints + "step-000000024.mpt"), Catch::Contains("shard-"));
}

TEST_CASE(
    "kill -9 of sharded ranks at random moments, checkpoints or not: the newest whole checkpoint resumes "
    "bit-exactly",
    "[slow][cli][dist]") {
  const std::string dir = scratch_dir("zero-kill9");
  auto args = [&](const std::string& run) {
    return std::vector<std::string>{"train",
                                    kMixed,
                                    "optimizer.name=adamw",
                                    "train.max_steps=160",
                                    "train.log_every_steps=1",
                                    "checkpoint.every_steps=4",
                                    "checkpoint.keep_last=2",
                                    "data.train_limit=8192",
                                    "data.test_limit=200",
                                    "distributed.shard_optimizer=true",
                                    "--nproc",
                                    "2",
                                    "--run-dir",
                                    dir + "/" + run};
  };
  run_ok(args("reference"));
  std::srand(static_cast<unsigned>(std::time(nullptr)));
  for (int kill_number = 0; kill_number < 3; ++kill_number) {
    const int pid = start_mpt(args("killed"), dir + "/kill.log");
    const std::string metrics = dir + "/killed/metrics.jsonl";
    const size_t lines_before = fs::exists(metrics) ? read_jsonl(metrics).size() : 0;
    for (int i = 0; i < 1000 && (!fs::exists(metrics) || read_jsonl(metrics).size() < lines_before + 12); ++i)
      std::this_thread::sleep_for(std::chrono::milliseconds(20));
    std::this_thread::sleep_for(std::chrono::milliseconds(std::rand() % 300));
    kill_hard(pid);  // the launcher and both ranks
    const auto latest = mpt::io::CheckpointStore(dir + "/killed/checkpoints", 2)
                            .latest_valid([](const std::string&, const std::string&) {});
    if (!latest) continue;  // killed before the first checkpoint
    CHECK(mpt::io::verify_checkpoint(*latest) == "");
  }
  run_ok(args("killed"));
  check_same_losses(dir + "/reference", dir + "/killed");
}
