// mpt's TensorBoard event files read by tensorboard itself: every promised tag is there, at every logged step,
// with the value metrics.jsonl and events.jsonl hold.
#include <catch2/catch.hpp>

#include <cmath>
#include <map>

#include "tests/support/helpers.h"

using namespace mpt::testing;

TEST_CASE("tensorboard's EventAccumulator reads every tag, step and value mpt logs", "[slow][interop]") {
  if (const std::string missing = python_missing("tensorboard"); !missing.empty()) MPT_SKIP(missing);
  const std::string dir = scratch_dir("tensorboard-reader");
  const CommandResult run = run_mpt({"train", source_path("configs/mlp_fmnist_mixed.yaml"), "train.max_steps=40",
                                     "train.log_every_steps=10", "train.eval_every_steps=20", "data.test_limit=500",
                                     "debug.inject_nonfinite_grad_at=[15]", "--run-dir", dir});
  INFO(run.output);
  REQUIRE(run.exit_code == 0);
  const CommandResult read = run_python(source_path("tests/interop/tensorboard_reference.py") + " " + dir);
  INFO(read.output);
  REQUIRE(read.exit_code == 0);
  const nlohmann::json scalars = nlohmann::json::parse(read.output.substr(read.output.find('{')));

  auto value_at = [&](const std::string& tag, int64_t step) {
    REQUIRE(scalars.contains(tag));
    for (const auto& point : scalars[tag])
      if (point[0] == step) return point[1].get<double>();
    FAIL("tag " << tag << " has no step " << step);
    return 0.0;
  };
  auto near = [](double a, double b) { return std::abs(a - b) <= 1e-6 * std::max(1.0, std::abs(b)); };
  int train_lines = 0, eval_lines = 0;
  for (const auto& line : read_jsonl(dir + "/metrics.jsonl")) {
    const int64_t step = line["step"];
    if (line["kind"] == "train") {
      ++train_lines;
      for (const char* key : {"loss", "accuracy", "lr", "loss_scale", "skipped_steps", "samples_per_sec"})
        CHECK(near(value_at(std::string("train/") + key, step), line[key].get<double>()));
    } else if (line["kind"] == "eval") {
      ++eval_lines;
      CHECK(near(value_at("eval/loss", step), line["eval"]["loss"].get<double>()));
      CHECK(near(value_at("eval/accuracy", step), line["eval"]["accuracy"].get<double>()));
    }
  }
  CHECK(train_lines == 4);
  CHECK(eval_lines >= 2);
  CHECK(scalars["train/loss"].size() == 4u);
  CHECK(value_at("loss_scale/backoff", 15) == 16384.0);  // the injected overflow's backoff, 2^15 -> 2^14
}
