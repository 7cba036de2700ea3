// `mpt bench`: the measured step, its breakdown, FLOP/s and MFU, and the max-batch search.
#include <catch2/catch.hpp>

#include "tests/support/helpers.h"

using namespace mpt::testing;

namespace {
const std::string kMixed = source_path("configs/mlp_fmnist_mixed.yaml");
}

TEST_CASE("mpt bench measures the training step with a breakdown that adds up, FLOP/s and MFU", "[fast][cli][bench]") {
  CommandResult run = run_mpt({"bench", kMixed, "--steps", "40", "--warmup", "5", "--json"});
  INFO(run.output);
  REQUIRE(run.exit_code == 0);
  const nlohmann::json r = nlohmann::json::parse(run.output.substr(run.output.find('{')));
  CHECK(r["precision"] == "mixed_bf16");
  CHECK(r["data"] == "synthetic");
  CHECK(r["batch"] == 128);
  CHECK(r["steps"] == 40);
  const double samples_per_sec = r["samples_per_sec"];
  REQUIRE(samples_per_sec > 0);
  // The phases are timed inside the same steps: together they are the mean step, less only the timer's cost.
  double phases = 0.0;
  for (const char* phase : {"data", "forward", "backward", "scaler", "optimizer"}) {
    CHECK(r["breakdown_ms"][phase].get<double>() >= 0.0);
    phases += r["breakdown_ms"][phase].get<double>();
  }
  const double mean_step_ms = 1000.0 * 128 / samples_per_sec;
  CHECK(phases > 0.8 * mean_step_ms);
  CHECK(phases < 1.02 * mean_step_ms);
  CHECK(r["train_flops_per_sample"] == Approx(6.0 * (784 * 512 + 512 * 10)));
  CHECK(r["achieved_flops"].get<double>() == Approx(r["train_flops_per_sample"].get<double>() * samples_per_sec));
  CHECK(r["peak_flops"]["dtype"] == "bf16");
  CHECK(r["peak_flops"]["flops"].get<double>() > 0);
  CHECK(r["mfu"].get<double>() > 0);
  CHECK(r["mfu"].get<double>() < 1);
  CHECK(r["peak_memory_bytes"].get<int64_t>() > 0);

  CommandResult table =
      run_mpt({"bench", kMixed, "--steps", "5", "--warmup", "1", "--real-data", "data.train_limit=2048"});
  INFO(table.output);
  CHECK(table.exit_code == 0);
  CHECK_THAT(table.output, Catch::Contains("real data"));
  CHECK_THAT(table.output, Catch::Contains("MFU"));
  CHECK(run_mpt({"bench", kMixed, "--steps", "0"}).exit_code == 2);
  CommandResult no_peak = run_mpt({"bench", kMixed, "--steps", "2", "--warmup", "0", "--no-peak", "--json"});
  REQUIRE(no_peak.exit_code == 0);
  CHECK(nlohmann::json::parse(no_peak.output.substr(no_peak.output.find('{')))["mfu"].is_null());
}

TEST_CASE("mpt bench --profile lists the ops of the step by self time", "[fast][cli][bench]") {
  CommandResult run =
      run_mpt({"bench", kMixed, "--steps", "5", "--warmup", "1", "--no-peak", "--profile", "4", "--json"});
  INFO(run.output);
  REQUIRE(run.exit_code == 0);
  const nlohmann::json ops = nlohmann::json::parse(run.output.substr(run.output.find('{')))["ops_per_step"];
  REQUIRE(ops.size() == 4);
  bool has_gemm = false;
  for (size_t i = 0; i < ops.size(); ++i) {
    CHECK(ops[i]["calls"].get<int64_t>() > 0);
    CHECK(ops[i]["total_ms"].get<double>() >= ops[i]["self_ms"].get<double>() - 1e-9);
    if (i > 0) CHECK(ops[i]["self_ms"].get<double>() <= ops[i - 1]["self_ms"].get<double>());
    const std::string name = ops[i]["name"];
    has_gemm = has_gemm || name == "aten::mm" || name == "aten::addmm";
  }
  CHECK(has_gemm);  // an MLP's step is mostly its matrix products
  CommandResult table = run_mpt({"bench", kMixed, "--steps", "3", "--warmup", "0", "--no-peak", "--profile", "3"});
  CHECK_THAT(table.output, Catch::Contains("ops per step"));
}

TEST_CASE("mpt bench --loader-only measures the data loader alone", "[fast][cli][bench]") {
  CommandResult run = run_mpt({"bench", kMixed, "--loader-only", "--real-data", "--steps", "50", "--json"});
  INFO(run.output);
  REQUIRE(run.exit_code == 0);
  const nlohmann::json r = nlohmann::json::parse(run.output.substr(run.output.find('{')));
  CHECK(r["loader_only"] == true);
  CHECK(r["data"] == "real");
  CHECK((r["device"] == "cpu" || r["device"] == "cuda"));  // the spec's device.type auto, resolved
  CHECK(r["batches"] == 50);
  CHECK(r["samples_per_sec"].get<double>() > 0);
}

TEST_CASE("debug.slow_down sleeps that fraction of each step inside it: the planted slowdown nightly must catch",
          "[fast][cli][bench]") {
  CommandResult run =
      run_mpt({"bench", kMixed, "--steps", "20", "--warmup", "2", "--json", "--no-peak", "debug.slow_down=2"});
  INFO(run.output);
  REQUIRE(run.exit_code == 0);
  const nlohmann::json r = nlohmann::json::parse(run.output.substr(run.output.find('{')));
  double phases = 0.0;  // the step's own work; the sleep comes after it, twice as long
  for (const char* phase : {"data", "forward", "backward", "scaler", "optimizer"})
    phases += r["breakdown_ms"][phase].get<double>();
  const double mean_step_ms = 1000.0 * 128 / r["samples_per_sec"].get<double>();
  CHECK(mean_step_ms > 2.5 * phases);
}

TEST_CASE("mpt bench --max-batch finds the largest batch within a memory budget for each precision",
          "[slow][cli][bench]") {
  CommandResult run = run_mpt({"bench", kMixed, "--max-batch", "--memory-budget-mib", "200", "--json"});
  INFO(run.output);
  REQUIRE(run.exit_code == 0);
  const nlohmann::json r = nlohmann::json::parse(run.output.substr(run.output.find("{\n")));
  const int64_t fp32 = r["max_batch"]["fp32"], mixed = r["max_batch"]["mixed_bf16"];
  CHECK(fp32 >= 8);
  CHECK(mixed >= 8);
  int64_t fp32_fail = 0;
  for (const auto& trial : r["trials"]) {
    const int64_t peak = trial["peak_memory_bytes"], batch = trial["batch"];
    if (trial["precision"] == "fp32" && batch <= fp32) CHECK(peak <= 200ll << 20);  // what it kept fits
    if (trial["precision"] == "fp32" && (peak < 0 || peak > (200ll << 20)))
      fp32_fail = fp32_fail ? std::min(fp32_fail, batch) : batch;
  }
  CHECK(fp32_fail > fp32);                                // the next size up did not fit
  CHECK(fp32_fail - fp32 <= std::max<int64_t>(8, fp32));  // found to within the search's resolution
}
