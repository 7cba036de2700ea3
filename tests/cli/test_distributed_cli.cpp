// Data-parallel training end to end: `mpt train --nproc 2` over Gloo on loopback, on real Fashion-MNIST.
#include <catch2/catch.hpp>

#include <signal.h>

#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <thread>

#include "io/checkpoint.h"
#include "tests/support/helpers.h"

using namespace mpt::testing;

namespace {

const std::string kMixed = source_path("configs/mlp_fmnist_mixed.yaml");
const std::string kFp32 = source_path("configs/mlp_fmnist_fp32.yaml");

// The largest |a - b| over all tensors of two checkpoints of the same model.
double max_weight_difference(const std::string& a, const std::string& b) {
  const auto left = mpt::io::read_checkpoint_weights(a), right = mpt::io::read_checkpoint_weights(b);
  REQUIRE(left.size() == right.size());
  double worst = 0.0;
  for (size_t i = 0; i < left.size(); ++i) {
    REQUIRE(left[i].first == right[i].first);
    if (!left[i].second.is_floating_point()) continue;
    worst = std::max(worst, (left[i].second - right[i].second).abs().max().item<double>());
  }
  return worst;
}

}  // namespace

TEST_CASE("two ranks of B train exactly like one process of 2B: averaged gradients, same curve", "[slow][cli][dist]") {
  // FP32 and plain SGD, so that the only difference is the order of FP32 additions in the all-reduce. Clipping
  // takes two ways to one rule: the one-pass check of one CPU process, tensor ops (as on a GPU) for the ranks.
  const std::vector<std::string> common = {
      "train.max_steps=40", "train.log_every_steps=10", "optimizer.name=sgd",      "optimizer.momentum=0.9",
      "optimizer.lr=0.05",  "data.test_limit=2000",     "train.grad_clip_norm=0.5"};
  const std::string one_dir = scratch_dir("dist-one"), two_dir = scratch_dir("dist-two");
  std::vector<std::string> one = {"train", kFp32, "data.batch_size=64", "--run-dir", one_dir};
  std::vector<std::string> two = {"train", kFp32, "data.batch_size=32", "--nproc", "2", "--run-dir", two_dir};
  one.insert(one.end(), common.begin(), common.end());
  two.insert(two.end(), common.begin(), common.end());
  CommandResult single = run_mpt(one);
  INFO(single.output);
  REQUIRE(single.exit_code == 0);
  CommandResult pair = run_mpt(two);
  INFO(pair.output);
  REQUIRE(pair.exit_code == 0);
  CHECK_THAT(pair.output, Catch::Contains("data parallel: 2 ranks (torchrun-style environment), gloo backend"));

  const nlohmann::json summary = read_json(two_dir + "/summary.json");
  CHECK(summary["distributed"]["world_size"] == 2);
  CHECK(summary["distributed"]["ranks_agree"] == true);
  CHECK(summary["global_batch_size"] == 64);
  const auto loss_one = metric_series(one_dir, "loss"), loss_two = metric_series(two_dir, "loss");
  REQUIRE(loss_two.size() == 4);
  REQUIRE(loss_one.size() == loss_two.size());
  for (size_t i = 0; i < loss_one.size(); ++i) {
    CHECK(loss_two[i].first == loss_one[i].first);
    CHECK(loss_two[i].second == Approx(loss_one[i].second).epsilon(1e-4));  // the logged loss is the global mean
  }
  const auto norm_one = metric_series(one_dir, "grad_norm"), norm_two = metric_series(two_dir, "grad_norm");
  REQUIRE(norm_two.size() == norm_one.size());
  for (size_t i = 0; i < norm_one.size(); ++i) CHECK(norm_two[i].second == Approx(norm_one[i].second).epsilon(1e-3));
  CHECK(norm_one.front().second > 0.5);  // the clip was in force
  CHECK(read_json(two_dir + "/summary.json")["eval"]["accuracy"].get<double>() ==
        Approx(read_json(one_dir + "/summary.json")["eval"]["accuracy"].get<double>()).margin(0.003));
  CHECK(max_weight_difference(one_dir + "/checkpoints/step-000000040.mpt",
                              two_dir + "/checkpoints/step-000000040.mpt") < 1e-4);
  // Rank 0 alone writes the run's files.
  CHECK(metric_series(two_dir, "loss").size() == 4);
  CHECK_FALSE(std::filesystem::exists(two_dir + "/ranks"));
}

TEST_CASE("an overflow on one rank makes every rank skip the same step and keep the same scale", "[slow][cli][dist]") {
  const std::string dir = scratch_dir("dist-overflow");
  CommandResult run = run_mpt({"train", kMixed, "train.max_steps=12", "train.log_every_steps=3",
                               "debug.inject_nonfinite_grad_at=[4, 9]", "debug.inject_nonfinite_rank=1",
                               "data.test_limit=1000", "--nproc", "2", "--run-dir", dir});
  INFO(run.output);
  REQUIRE(run.exit_code == 0);
  const nlohmann::json summary = read_json(dir + "/summary.json");
  CHECK(summary["skipped_steps"] == 2);  // rank 0's own gradients were finite
  CHECK(summary["loss_scale"]["backoffs"] == 2);
  CHECK(summary["loss_scale"]["final"] == 8192.0);
  CHECK(summary["distributed"]["ranks_agree"] == true);  // same scale, steps and weights on both ranks
  int skips = 0;
  for (const auto& event : read_jsonl(dir + "/events.jsonl"))
    if (event["kind"] == "skip") {
      ++skips;
      CHECK_THAT(event["reason"].get<std::string>(), Catch::Contains("on another rank"));
    }
  CHECK(skips == 2);
}

TEST_CASE("a rank that dies stops the job with a clear error instead of a hang", "[slow][cli][dist]") {
  const std::string dir = scratch_dir("dist-death");
  const auto start = std::chrono::steady_clock::now();
  CommandResult run = run_mpt({"train", kMixed, "train.max_steps=50", "debug.die_at_step=5",
                               "distributed.timeout_sec=120", "--nproc", "2", "--run-dir", dir});
  const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  INFO(run.output);
  CHECK(run.exit_code == 1);  // a documented code, not 128 + SIGKILL
  CHECK(seconds < 60);        // the survivor learns of the death from its socket, well before the timeout
  CHECK_THAT(run.output, Catch::Contains("rank 1 was killed by signal 9"));
  CHECK_THAT(run.output, Catch::Contains("rank 0: overflow-flag all-reduce failed: another rank has died"));
  // The run directory keeps the trace that a terminal or a lost nohup.out would not.
  const nlohmann::json summary = read_json(dir + "/summary.json");
  CHECK(summary["status"] == "failed");
  CHECK(summary["failed_rank"] == 1);
  CHECK_THAT(summary["diagnosis"].get<std::string>(), Catch::Contains("rank 1 was killed by signal 9"));
  bool survivor_failed = false, death_recorded = false;
  for (const auto& event : read_jsonl(dir + "/events.jsonl")) {
    if (event["kind"] == "failed" && event["rank"] == 0) survivor_failed = event["step"].get<int64_t>() >= 4;
    if (event["kind"] == "rank_exit" && event["rank"] == 1) death_recorded = event["exit_code"] == 137;
  }
  CHECK(survivor_failed);
  CHECK(death_recorded);
  CHECK_THAT(read_file_text(dir + "/train.log"), Catch::Contains("rank 0 failed"));
}

TEST_CASE("a checkpoint resumes on another world size, its data position re-sharded", "[slow][cli][dist]") {
  const std::string dir = scratch_dir("dist-resume");
  const std::vector<std::string> spec = {
      "train",     kMixed, "train.max_steps=9", "train.log_every_steps=1", "data.batch_size=32", "data.test_limit=1000",
      "--run-dir", dir};
  std::vector<std::string> first = spec;
  first.insert(first.end(), {"debug.stop_after_steps=3", "--nproc", "2"});
  CommandResult pair = run_mpt(first);
  INFO(pair.output);
  CHECK(read_json(dir + "/summary.json")["status"] == "interrupted");

  std::vector<std::string> second = spec;
  second.insert(second.end(), {"debug.stop_after_steps=6"});  // 1 process: 3 more steps
  CommandResult alone = run_mpt(second);
  INFO(alone.output);
  CHECK_THAT(alone.output, Catch::Contains("epoch 0 batch 3 of 64 samples -> epoch 0 batch 6 of 32 samples"));

  std::vector<std::string> third = spec;
  third.insert(third.end(), {"--nproc", "2"});  // back to 2 ranks under --resume auto
  CommandResult again = run_mpt(third);
  INFO(again.output);
  REQUIRE(again.exit_code == 0);
  CHECK_THAT(again.output, Catch::Contains("epoch 0 batch 9 of 32 samples -> epoch 0 batch 4 of 64 samples"));
  const nlohmann::json summary = read_json(dir + "/summary.json");
  CHECK(summary["status"] == "completed");
  CHECK(summary["steps"] == 9);
  CHECK(summary["distributed"]["world_size"] == 2);
  std::vector<int64_t> steps;
  for (const auto& [step, loss] : metric_series(dir, "loss")) steps.push_back(step);
  CHECK(steps == std::vector<int64_t>{1, 2, 3, 4, 5, 6, 7, 8, 9});
}

TEST_CASE("launcher mistakes are one-line errors: --nproc under a launcher, an unreachable master",
          "[fast][cli][dist]") {
  const std::string dir = scratch_dir("dist-errors");
  ::setenv("WORLD_SIZE", "2", 1);
  ::setenv("RANK", "1", 1);
  ::setenv("MASTER_ADDR", "127.0.0.1", 1);
  ::setenv("MASTER_PORT", "1", 1);  // nobody listens there
  CommandResult nested = run_mpt({"train", kMixed, "--nproc", "2", "--run-dir", dir});
  CommandResult unreachable = run_mpt({"train", kMixed, "distributed.timeout_sec=2", "--run-dir", dir});
  for (const char* name : {"WORLD_SIZE", "RANK", "MASTER_ADDR", "MASTER_PORT"}) ::unsetenv(name);
  CHECK(nested.exit_code == 2);
  CHECK_THAT(nested.output, Catch::Contains("WORLD_SIZE/RANK are already set by a launcher"));
  CHECK(unreachable.exit_code == 1);
  CHECK_THAT(unreachable.output,
             Catch::Contains("rank 1 of 2: no rendezvous at MASTER_ADDR:MASTER_PORT = 127.0.0.1:1 within 2 s"));
  CHECK_FALSE(std::filesystem::exists(dir + "/config.yaml"));
}

TEST_CASE("synchronised batch norm makes two ranks of B normalise exactly like one process of 2B",
          "[slow][cli][dist]") {
  const std::vector<std::string> common = {"precision.mode=fp32", "train.max_steps=4",  "train.log_every_steps=1",
                                           "data.augment=false",  "data.test_limit=64", "train.eval_batch_size=64"};
  const std::string resnet = source_path("configs/resnet18_fmnist_mixed.yaml");
  const std::string one_dir = scratch_dir("dist-bn-one"), sync_dir = scratch_dir("dist-bn-sync"),
                    local_dir = scratch_dir("dist-bn-local");
  auto run = [&](std::vector<std::string> args) {
    args.insert(args.begin() + 2, common.begin(), common.end());
    CommandResult result = run_mpt(args);
    INFO(result.output);
    REQUIRE(result.exit_code == 0);
  };
  run({"train", resnet, "data.batch_size=8", "--run-dir", one_dir});
  run({"train", resnet, "data.batch_size=4", "distributed.sync_batchnorm=true", "--nproc", "2", "--run-dir", sync_dir});
  run({"train", resnet, "data.batch_size=4", "--nproc", "2", "--run-dir", local_dir});
  const auto one = metric_series(one_dir, "loss"), sync = metric_series(sync_dir, "loss"),
             local = metric_series(local_dir, "loss");
  REQUIRE(one.size() == 4);
  REQUIRE(sync.size() == 4);
  REQUIRE(local.size() == 4);
  double local_gap = 0.0;
  for (size_t i = 0; i < one.size(); ++i) {
    CHECK(sync[i].second == Approx(one[i].second).epsilon(1e-5));
    local_gap = std::max(local_gap, std::abs(local[i].second - one[i].second));
  }
  CHECK(local_gap > 1e-3);  // per-rank statistics of 4 samples are not those of 8
  // Running statistics (checkpointed buffers) come from the global batch too.
  const std::string last = "/checkpoints/step-000000004.mpt";
  CHECK(max_weight_difference(one_dir + last, sync_dir + last) < 1e-5);
  CHECK(max_weight_difference(one_dir + last, local_dir + last) > 1e-4);
}

TEST_CASE("Ctrl-C on --nproc stops every rank after the same step, with one checkpoint to resume",
          "[slow][cli][dist]") {
  const std::string dir = scratch_dir("dist-interrupt");
  const std::vector<std::string> args = {
      "train",     kMixed, "train.max_steps=100000", "train.log_every_steps=1", "data.test_limit=500", "--nproc", "2",
      "--run-dir", dir};
  const int pid = start_mpt(args, dir + ".log");
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(60);
  while (std::chrono::steady_clock::now() < deadline &&
         (!std::filesystem::exists(dir + "/metrics.jsonl") || read_jsonl(dir + "/metrics.jsonl").size() < 20))
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  ::kill(pid, SIGINT);  // the launcher only, as a terminal's Ctrl-C reaches it
  const int code = wait_mpt(pid);
  INFO(read_file_text(dir + ".log"));
  CHECK(code == 1);  // interrupted, not killed
  const nlohmann::json summary = read_json(dir + "/summary.json");
  CHECK(summary["status"] == "interrupted");
  CHECK(summary["distributed"]["ranks_agree"] == true);  // both stopped after the same step
  const int64_t steps = summary["steps"].get<int64_t>();
  CHECK(std::filesystem::exists(dir + "/checkpoints/step-" + std::string(9 - std::to_string(steps).size(), '0') +
                                std::to_string(steps) + ".mpt"));
}

TEST_CASE("FP8 under data parallelism: the ranks agree on each step's amaxes and train to the same weights",
          "[slow][cli][dist][fp8]") {
  const std::string dir = scratch_dir("dist-fp8");
  CommandResult run =
      run_mpt({"train", source_path("configs/mlp_fmnist_fp8.yaml"), "train.max_steps=30", "train.log_every_steps=10",
               "data.batch_size=32", "data.test_limit=1000", "--nproc", "2", "--run-dir", dir});
  INFO(run.output);
  REQUIRE(run.exit_code == 0);
  const nlohmann::json summary = read_json(dir + "/summary.json");
  CHECK(summary["precision"] == "fp8");
  CHECK(summary["distributed"]["ranks_agree"] == true);
  bool scaled = false;
  for (const auto& event : read_jsonl(dir + "/events.jsonl")) scaled |= event["kind"] == "fp8_scale";
  CHECK(scaled);
}
