// The README's torchrun line with the real launcher: `python -m torch.distributed.run --standalone
// --nproc-per-node 2 --no-python mpt train ...`. The elastic agent hosts the TCP store and sets the launch
// variables (TORCHELASTIC_USE_AGENT_STORE included): mpt's ranks must join it as clients, rank 0 too, and train.
#include <catch2/catch.hpp>

#include <unistd.h>

#include "tests/support/helpers.h"

using namespace mpt::testing;

TEST_CASE("torchrun --standalone --nproc-per-node 2 --no-python trains two ranks that agree", "[slow][interop][dist]") {
  if (const std::string missing = python_missing("torch.distributed.run"); !missing.empty()) MPT_SKIP(missing);
  const std::string dir = scratch_dir("torchrun");
  const CommandResult run = run_python(
      "-m torch.distributed.run --standalone --nproc-per-node 2 --no-python " MPT_BINARY " train " +
      source_path("configs/mlp_fmnist_mixed.yaml") + " train.max_steps=12 data.test_limit=500 --run-dir " + dir);
  INFO(run.output);
  REQUIRE(run.exit_code == 0);
  const nlohmann::json summary = read_json(dir + "/summary.json");
  CHECK(summary["status"] == "completed");
  CHECK(summary["distributed"]["world_size"] == 2);
  CHECK(summary["distributed"]["ranks_agree"] == true);
}
