// The three numeric guards: a golden loss on a tiny config, resume == uninterrupted (bit-exact on CPU),
// and k accumulated micro-batches == one batch of k x B.
#include <catch2/catch.hpp>

#include "tests/support/helpers.h"

using namespace mpt::testing;

namespace {

const std::string kFp32 = source_path("configs/mlp_fmnist_fp32.yaml");
const std::string kMixed = source_path("configs/mlp_fmnist_mixed.yaml");
const std::string kFp8 = source_path("configs/mlp_fmnist_fp8.yaml");

std::vector<std::string> tiny(const std::string& spec, const std::string& dir, std::vector<std::string> extra) {
  std::vector<std::string> args = {"train",
                                   spec,
                                   "data.train_limit=4096",
                                   "data.test_limit=1000",
                                   "data.batch_size=64",
                                   "train.log_every_steps=1",
                                   "schedule.warmup_steps=10",
                                   "--run-dir",
                                   dir};
  args.insert(args.end(), extra.begin(), extra.end());
  return args;
}

double loss_at(const std::vector<std::pair<int64_t, double>>& series, int64_t step) {
  for (const auto& [s, v] : series)
    if (s == step) return v;
  FAIL("no metrics line for step " << step);
  return 0;
}

}  // namespace

TEST_CASE("golden loss: a tiny FP32 and a tiny BF16 run follow their recorded curves", "[slow][numerics]") {
  // Recorded on the reference machine (OpenBLAS, 2 threads). A change here means the numerics changed:
  // find out why before re-recording.
  struct Golden {
    std::string spec;
    double step1, step40;
  };
  for (const Golden& golden :
       {Golden{kFp32, 2.376239061355591, 0.7241401076316833}, Golden{kMixed, 2.376025438308716, 0.7284926772117615}}) {
    const std::string dir = scratch_dir("golden");
    CommandResult run = run_mpt(tiny(golden.spec, dir, {"train.max_steps=40"}));
    INFO(run.output);
    REQUIRE(run.exit_code == 0);
    auto loss = metric_series(dir, "loss");
    CHECK(loss_at(loss, 1) == Approx(golden.step1).epsilon(1e-4));
    CHECK(loss_at(loss, 40) == Approx(golden.step40).epsilon(2e-3));
  }
}

TEST_CASE("resuming at step k gives exactly the losses of an uninterrupted run", "[slow][numerics]") {
  const std::vector<std::pair<std::string, std::string>> variants = {
      {kFp32, "precision.strategy=autocast"},
      {kMixed, "precision.strategy=autocast"},
      {kMixed, "precision.strategy=master_weights"},
      // FP8's delayed scales and amax histories travel in the checkpoint: without them the resumed steps would
      // cast with other scales.
      {kFp8, "precision.strategy=autocast"},
      {kFp8, "precision.strategy=master_weights"}};
  for (const auto& [spec, strategy] : variants) {
    const std::string straight = scratch_dir("resume-straight"), resumed = scratch_dir("resume-resumed");
    const std::vector<std::string> common = {"train.max_steps=60",   "checkpoint.every_steps=25", "model.dropout=0.1",
                                             "schedule.name=cosine", "train.grad_clip_norm=1.0",  strategy};
    REQUIRE(run_mpt(tiny(spec, straight, common)).exit_code == 0);
    auto first = common;
    first.push_back("debug.stop_after_steps=37");
    CommandResult stopped = run_mpt(tiny(spec, resumed, first));
    CHECK(stopped.exit_code == 1);
    CHECK(read_json(resumed + "/summary.json")["status"] == "interrupted");
    CommandResult second = run_mpt(tiny(spec, resumed, common));  // --resume auto is the default
    INFO(second.output);
    REQUIRE(second.exit_code == 0);
    CHECK_THAT(second.output, Catch::Contains("resumed from") && Catch::Contains("step-000000037.mpt"));

    auto expected = metric_series(straight, "loss");
    std::map<int64_t, double> got;
    for (const auto& [step, loss] : metric_series(resumed, "loss")) got[step] = loss;  // later lines win
    REQUIRE(expected.size() == 60);
    for (const auto& [step, loss] : expected) CHECK(got.at(step) == loss);  // bit-exact
    CHECK(read_json(resumed + "/summary.json")["eval"]["loss"] ==
          read_json(straight + "/summary.json")["eval"]["loss"]);
  }
}

TEST_CASE("k accumulated micro-batches train like one batch of k x B", "[slow][numerics]") {
  const std::string one = scratch_dir("accum-one"), four = scratch_dir("accum-four");
  REQUIRE(run_mpt(tiny(kFp32, one, {"train.max_steps=30", "data.batch_size=256"})).exit_code == 0);
  REQUIRE(
      run_mpt(tiny(kFp32, four, {"train.max_steps=30", "data.batch_size=64", "train.grad_accum_steps=4"})).exit_code ==
      0);
  auto a = metric_series(one, "loss"), b = metric_series(four, "loss");
  REQUIRE(a.size() == b.size());
  for (size_t i = 0; i < a.size(); ++i) CHECK(b[i].second == Approx(a[i].second).epsilon(1e-4));
  CHECK(read_json(four + "/summary.json")["eval"]["loss"].get<double>() ==
        Approx(read_json(one + "/summary.json")["eval"]["loss"].get<double>()).epsilon(1e-4));
}

TEST_CASE("autocast and master_weights strategies train to the same loss", "[slow][numerics]") {
  const std::string autocast = scratch_dir("strategy-autocast"), master = scratch_dir("strategy-master");
  REQUIRE(run_mpt(tiny(kMixed, autocast, {"train.max_steps=40"})).exit_code == 0);
  CommandResult run = run_mpt(tiny(kMixed, master, {"train.max_steps=40", "precision.strategy=master_weights"}));
  INFO(run.output);
  REQUIRE(run.exit_code == 0);
  CHECK(read_json(master + "/summary.json")["precision_strategy"] == "master_weights");
  auto a = metric_series(autocast, "loss"), b = metric_series(master, "loss");
  REQUIRE(a.size() == b.size());
  // Both compute with the BF16 rounding of the same FP32 weights; only accumulation order may differ.
  for (size_t i = 0; i < a.size(); ++i) CHECK(b[i].second == Approx(a[i].second).epsilon(1e-3));
  CHECK(read_json(master + "/summary.json")["eval"]["loss"].get<double>() ==
        Approx(read_json(autocast + "/summary.json")["eval"]["loss"].get<double>()).epsilon(1e-3));
}
