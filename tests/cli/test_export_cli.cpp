// `mpt export`, `mpt eval` and `model.init_from` end to end on the MLP and real Fashion-MNIST.
#include <catch2/catch.hpp>

#include <filesystem>

#include "tests/support/helpers.h"

using namespace mpt::testing;

TEST_CASE("a run exported as safetensors or torch evaluates to its own accuracy and seeds a new run", "[slow][cli]") {
  const std::string dir = scratch_dir("cli-export");
  const std::string spec = source_path("configs/mlp_fmnist_mixed.yaml");
  CommandResult train =
      run_mpt({"train", spec, "train.max_steps=60", "data.test_limit=1000", "--run-dir", dir + "/run"});
  INFO(train.output);
  REQUIRE(train.exit_code == 0);
  const double accuracy = read_json(dir + "/run/summary.json")["eval"]["accuracy"].get<double>();

  for (const std::string format : {"safetensors", "torch"}) {
    const std::string file = dir + "/mlp." + format;
    CommandResult exported = run_mpt({"export", dir + "/run", "--format", format, "--out", file});
    INFO(exported.output);
    REQUIRE(exported.exit_code == 0);
    CHECK_THAT(exported.output, Catch::Contains("exported 4 tensors"));
    CommandResult eval = run_mpt({"eval", spec, "model.init_from=" + file, "data.test_limit=1000", "--json"});
    INFO(eval.output);
    REQUIRE(eval.exit_code == 0);
    const auto report = nlohmann::json::parse(eval.output.substr(eval.output.find('{')));
    CHECK(report["accuracy"].get<double>() == Approx(accuracy).margin(1e-9));
    CHECK(report["samples"] == 1000);
  }

  CommandResult seeded = run_mpt({"train", spec, "model.init_from=" + dir + "/mlp.safetensors", "train.max_steps=1",
                                  "data.test_limit=1000", "--run-dir", dir + "/seeded"});
  INFO(seeded.output);
  REQUIRE(seeded.exit_code == 0);
  CHECK_THAT(seeded.output, Catch::Contains("loaded 4 tensors; 0 kept their initialisation"));
  CHECK(read_json(dir + "/seeded/summary.json")["eval"]["accuracy"].get<double>() > accuracy - 0.05);

  CommandResult missing = run_mpt({"eval", spec});
  CHECK(missing.exit_code == 2);
  CHECK_THAT(missing.output, Catch::Contains("mpt eval needs weights: set model.init_from"));
  CommandResult no_file = run_mpt({"train", spec, "model.init_from=" + dir + "/none.pt"});
  CHECK(no_file.exit_code == 2);
  CHECK_THAT(no_file.output, Catch::Contains("model.init_from = " + dir + "/none.pt: no such file"));
  CommandResult empty_run = run_mpt({"export", dir, "--out", dir + "/x.safetensors"});
  CHECK(empty_run.exit_code == 2);
  CHECK_THAT(empty_run.output, Catch::Contains("not a run directory"));
}
