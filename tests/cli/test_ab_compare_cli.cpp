// `mpt ab-compare` end to end on real Fashion-MNIST: PASS with reports, reuse of finished runs, comparing run
// directories, refusing specs that differ in more than precision, planted regressions that FAIL, bad usage.
#include <catch2/catch.hpp>

#include <filesystem>
#include <fstream>

#include "tests/support/helpers.h"

using namespace mpt::testing;

namespace {

const std::string kMixed = source_path("configs/mlp_fmnist_mixed.yaml");
const std::string kFp32 = source_path("configs/mlp_fmnist_fp32.yaml");

// The shipped mixed spec with one line replaced or text appended: a planted regression.
std::string planted_spec(const std::string& dir, const std::string& from, const std::string& to,
                         const std::string& appended = "") {
  std::string text = read_file_text(kMixed);
  if (!from.empty()) {
    const size_t at = text.find(from);
    REQUIRE(at != std::string::npos);
    text.replace(at, from.size(), to);
  }
  const std::string path = dir + "/mlp_fmnist_planted.yaml";
  std::ofstream(path) << text << appended;
  return path;
}

bool has_tensorboard_file(const std::string& dir) {
  for (const auto& entry : std::filesystem::directory_iterator(dir))
    if (entry.path().filename().string().rfind("events.out.tfevents.", 0) == 0) return true;
  return false;
}

}  // namespace

TEST_CASE("ab-compare of the shipped FP32 and mixed specs PASSes, reports, and reuses finished runs",
          "[slow][cli][compare]") {
  const std::string out = scratch_dir("ab-pass");
  // Log every 5 steps: steps-to-target then compares 20-step trailing means at 5-step resolution. At 20-step
  // resolution B's reaching A's loss at 90% of training hung on one logged point: curves within 1e-3 of each
  // other, and B missed by 6e-4 after the fused Adam's rounding changed.
  const std::vector<std::string> args = {"ab-compare", kFp32, kMixed, "train.max_steps=400", "train.log_every_steps=5",
                                         "--out",      out};
  CommandResult first = run_mpt(args);
  INFO(first.output);
  REQUIRE(first.exit_code == 0);
  CHECK_THAT(first.output, Catch::Contains("verdict: PASS"));
  const std::string a_dir = out + "/A-mlp_fmnist_fp32", b_dir = out + "/B-mlp_fmnist_mixed";
  CHECK(has_tensorboard_file(a_dir));  // `tensorboard --logdir OUT` overlays A and B
  CHECK(has_tensorboard_file(b_dir));

  nlohmann::json compare = read_json(out + "/compare.json");
  CHECK(compare["verdict"] == "PASS");
  CHECK(compare["a"]["precision"] == "fp32");
  CHECK(compare["b"]["precision"] == "mixed_bf16");
  CHECK(compare["a"]["steps"] == 400);
  CHECK(std::abs(compare["accuracy_gap"].get<double>()) < 0.005);
  CHECK(compare["speedup"].get<double>() > 0);
  CHECK(compare["speed"]["source"] == "interleaved");  // 3 rounds of mpt bench, alternating A and B
  CHECK(compare["speed"]["round_ratios"].size() == 3);
  CHECK(compare["b"]["loss_scale"]["mode"] == "dynamic");
  CHECK(compare["a"]["steps_to_target"].is_number());
  CHECK(compare["b"]["steps_to_target"].is_number());

  const std::string html = read_file_text(out + "/report.html");
  INFO(markup_problem(html));
  CHECK(markup_problem(html).empty());
  for (const char* id : {"chart-loss", "chart-eval", "chart-loss-scale", "chart-throughput"})
    CHECK_THAT(html, Catch::Contains(std::string("<svg id=\"") + id + "\""));
  CHECK_THAT(read_file_text(out + "/compare.md"), Catch::Contains("| test accuracy |"));

  // Again: both runs are reused as they are, nothing retrains.
  const auto checkpoint = b_dir + "/checkpoints/step-000000400.mpt";
  const auto written = std::filesystem::last_write_time(checkpoint);
  CommandResult again = run_mpt(args);
  INFO(again.output);
  CHECK(again.exit_code == 0);
  CHECK_THAT(again.output, Catch::Contains("A " + a_dir + ": reusing the finished run"));
  CHECK_THAT(again.output, Catch::Contains("B " + b_dir + ": reusing the finished run"));
  CHECK(std::filesystem::last_write_time(checkpoint) == written);
  CHECK(read_json(out + "/compare.json")["accuracy_gap"] == compare["accuracy_gap"]);

  // Two finished run directories compare without retraining; --max-batch-budget adds each side's largest batch.
  const std::string reports = scratch_dir("ab-dirs");
  CommandResult dirs =
      run_mpt({"ab-compare", a_dir, b_dir, "--out", reports, "--speed-rounds", "0", "--max-batch-budget", "200"});
  INFO(dirs.output);
  CHECK(dirs.exit_code == 0);
  const nlohmann::json from_dirs = read_json(reports + "/compare.json");
  CHECK(from_dirs["accuracy_gap"] == compare["accuracy_gap"]);
  CHECK(from_dirs["max_batch_budget_bytes"] == 200ll << 20);
  CHECK(from_dirs["a"]["max_batch"].get<int64_t>() >= 8);
  CHECK(from_dirs["b"]["max_batch"].get<int64_t>() >= 8);
  CHECK_THAT(read_file_text(reports + "/compare.md"), Catch::Contains("| max batch within 200 MiB |"));
}

TEST_CASE("summary.json keeps the training steps' peak memory apart from evaluation, checkpoints and the process",
          "[slow][cli][compare]") {
  const std::string run = scratch_dir("phase-memory") + "/run";
  CommandResult train = run_mpt({"train", kMixed, "train.max_steps=20", "train.eval_every_steps=10",
                                 "checkpoint.every_steps=10", "--run-dir", run});
  INFO(train.output);
  REQUIRE(train.exit_code == 0);
  const nlohmann::json summary = read_json(run + "/summary.json");
  const nlohmann::json& memory = summary["memory"];
  CHECK(memory["kind"] == "CPU tensors");
  CHECK(memory["training_peak_bytes"] == summary["peak_memory_bytes"]);  // the A/B memory answer
  CHECK(memory["training_peak_bytes"].get<int64_t>() > 0);
  for (const char* phase : {"evaluation_peak_bytes", "checkpoint_peak_bytes"}) CHECK(memory[phase].get<int64_t>() >= 0);
  // The process peak is absolute (the datasets and libraries included), the phases are above the baseline.
  CHECK(memory["process_peak_bytes"].get<int64_t>() > memory["training_peak_bytes"].get<int64_t>());
}

TEST_CASE("a learning-rate slip in B is refused unless allowed, and then FAILs on accuracy with exit 3",
          "[slow][cli][compare]") {
  const std::string out = scratch_dir("ab-lr");
  const std::string planted = planted_spec(out, "lr: 0.001", "lr: 0.00001");
  const std::vector<std::string> args = {
      "ab-compare",           kFp32,   planted,    "train.max_steps=200", "train.log_every_steps=10",
      "data.test_limit=2000", "--out", out + "/ab"};
  CommandResult refused = run_mpt(args);
  INFO(refused.output);
  CHECK(refused.exit_code == 2);
  CHECK_THAT(refused.output, Catch::Contains("optimizer.lr: 0.001 in A, 0.00001 in B"));
  CHECK_THAT(refused.output, Catch::Contains("--allow-diff"));
  CHECK_FALSE(std::filesystem::exists(out + "/ab"));  // refused before any run

  std::vector<std::string> allowed = args;
  allowed.insert(allowed.end(), {"--allow-diff", "optimizer.lr"});
  CommandResult failed = run_mpt(allowed);
  INFO(failed.output);
  CHECK(failed.exit_code == 3);
  CHECK_THAT(failed.output, Catch::Contains("verdict: FAIL"));
  nlohmann::json compare = read_json(out + "/ab/compare.json");
  CHECK(compare["verdict"] == "FAIL");
  CHECK(compare["exit_code"] == 3);
  CHECK(compare["allowed_differences"][0] == "optimizer.lr: 0.001 in A, 0.00001 in B");
  REQUIRE_FALSE(compare["failures"].empty());
  CHECK_THAT(compare["failures"][0].get<std::string>(), Catch::Contains("below the baseline's"));
  CHECK_THAT(read_file_text(out + "/ab/compare.md"), Catch::Contains("optimizer.lr: 0.001 in A, 0.00001 in B"));
}

TEST_CASE("an overflow storm in B FAILs with exit 3 and names the layer to keep in FP32", "[slow][cli][compare]") {
  const std::string out = scratch_dir("ab-storm");
  const std::string planted =
      planted_spec(out, "", "",
                   "debug:\n  inject_nonfinite_grad_at: [20, 30, 40, 50, 60, 70, 80, 90, 100, 110, 120, 130]\n"
                   "  inject_nonfinite_param: hidden.0.weight\n");
  CommandResult run = run_mpt({"ab-compare", kFp32, planted, "train.max_steps=200", "train.log_every_steps=10",
                               "data.test_limit=2000", "--allow-diff", "debug.", "--out", out + "/ab"});
  INFO(run.output);
  CHECK(run.exit_code == 3);
  nlohmann::json compare = read_json(out + "/ab/compare.json");
  CHECK(compare["verdict"] == "FAIL");
  CHECK(compare["b"]["loss_scale"]["skipped_steps"] == 12);
  CHECK(compare["b"]["loss_scale"]["backoffs"] == 12);
  CHECK_THAT(compare["failures"].dump(), Catch::Contains("skipped 12 of 200 optimizer steps (6.00%)"));
  REQUIRE_FALSE(compare["suspects"].empty());
  CHECK_THAT(compare["suspects"][0].get<std::string>(), Catch::Contains("hidden.0.weight"));
  CHECK_THAT(compare["notes"].dump(), Catch::Contains("precision.fp32_modules"));
  // The report marks each backoff on the loss-scale chart.
  const std::string html = read_file_text(out + "/ab/report.html");
  CHECK_THAT(html, Catch::Contains("B: backoff at step 130"));
}

TEST_CASE("ab-compare usage errors exit 2 with the reason", "[fast][cli][compare]") {
  const std::string dir = scratch_dir("ab-usage");
  CommandResult mixed_kinds = run_mpt({"ab-compare", dir, kMixed});
  CHECK(mixed_kinds.exit_code == 2);
  CHECK_THAT(mixed_kinds.output, Catch::Contains("two specs or two run directories"));

  CommandResult typo = run_mpt({"ab-compare", kFp32, kMixed, "--allow-diff", "optimizer.lrr"});
  CHECK(typo.exit_code == 2);
  CHECK_THAT(typo.output, Catch::Contains("did you mean optimizer.lr?"));

  CommandResult no_runs = run_mpt({"ab-compare", dir, dir});
  CHECK(no_runs.exit_code == 2);
  CHECK_THAT(no_runs.output, Catch::Contains("no config.yaml"));

  CHECK(run_mpt({"ab-compare", kFp32, kMixed, "--repeats", "0"}).exit_code == 2);
  CHECK(run_mpt({"ab-compare", kFp32}).exit_code == 2);
}

TEST_CASE("ab-compare with --repeats trains each side once per seed and reports the seed-to-seed noise",
          "[slow][cli][compare]") {
  const std::string out = scratch_dir("ab-repeats");
  CommandResult run = run_mpt({"ab-compare", kFp32, kMixed, "train.max_steps=60", "train.log_every_steps=10",
                               "data.train_limit=8192", "data.test_limit=1000", "--repeats", "2", "--out", out});
  INFO(run.output);
  CHECK((run.exit_code == 0 || run.exit_code == 3));  // the verdict is not the point here
  for (const char* dir :
       {"A-mlp_fmnist_fp32", "B-mlp_fmnist_mixed", "A-mlp_fmnist_fp32-seed1", "B-mlp_fmnist_mixed-seed1"})
    CHECK(std::filesystem::exists(out + "/" + dir + "/summary.json"));
  CHECK(read_json(out + "/A-mlp_fmnist_fp32-seed1/summary.json")["steps"] == 60);
  CHECK_THAT(read_file_text(out + "/A-mlp_fmnist_fp32-seed1/config.yaml"), Catch::Contains("seed: 1"));
  nlohmann::json compare = read_json(out + "/compare.json");
  CHECK(compare["repeats"] == 2);
  CHECK(compare["a"]["accuracies"].size() == 2);
  CHECK(compare["b"]["accuracies"].size() == 2);
  CHECK(compare["a"]["accuracies"][0] != compare["a"]["accuracies"][1]);  // different seeds, different runs
  CHECK_THAT(compare["notes"].dump(), Catch::Contains("seed-to-seed noise (pooled std over 2 seeds)"));
}

TEST_CASE("ab-compare of BF16 against FP8 PASSes and charts the FP8 scales", "[slow][cli][compare][fp8]") {
  const std::string out = scratch_dir("ab-fp8");
  CommandResult run = run_mpt({"ab-compare", kMixed, source_path("configs/mlp_fmnist_fp8.yaml"), "train.max_steps=400",
                               "train.log_every_steps=5", "--speed-rounds", "1", "--out", out});
  INFO(run.output);
  REQUIRE(run.exit_code == 0);
  const nlohmann::json compare = read_json(out + "/compare.json");
  CHECK(compare["verdict"] == "PASS");
  CHECK(compare["b"]["precision"] == "fp8");
  const std::string html = read_file_text(out + "/report.html");
  CHECK(markup_problem(html).empty());
  CHECK_THAT(html, Catch::Contains("<svg id=\"chart-fp8-scale\""));
}
