// A resumed run re-logs the steps after its checkpoint into a new event file; the SessionLog START it writes
// first makes tensorboard's own EventAccumulator keep one value per step, the resumed run's.
#include <catch2/catch.hpp>

#include <nlohmann/json.hpp>

#include "io/tensorboard.h"
#include "tests/support/helpers.h"

TEST_CASE("after a resume TensorBoard shows each step once, from the resumed run", "[fast][interop]") {
  if (const std::string missing = mpt::testing::python_missing("tensorboard"); !missing.empty()) MPT_SKIP(missing);
  const std::string dir = mpt::testing::scratch_dir("tensorboard-restart");
  {
    mpt::io::TensorBoardWriter crashed(dir);
    for (int step = 1; step <= 10; ++step) crashed.scalar("train/loss", step, 1.0);
  }
  {
    mpt::io::TensorBoardWriter resumed(dir);  // resumed from the checkpoint at step 5
    resumed.restart_at(6);
    for (int step = 6; step <= 10; ++step) resumed.scalar("train/loss", step, 2.0);
  }
  const auto read =
      mpt::testing::run_python(mpt::testing::source_path("tests/interop/tensorboard_reference.py") + " " + dir);
  INFO(read.output);
  REQUIRE(read.exit_code == 0);
  const auto scalars = nlohmann::json::parse(read.output.substr(read.output.find('{')));
  std::vector<std::pair<int, double>> points;
  for (const auto& point : scalars["train/loss"]) points.emplace_back(point[0].get<int>(), point[1].get<double>());
  std::vector<std::pair<int, double>> expected;
  for (int step = 1; step <= 10; ++step) expected.emplace_back(step, step <= 5 ? 1.0 : 2.0);
  CHECK(points == expected);
}
