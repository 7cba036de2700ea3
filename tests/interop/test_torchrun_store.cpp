// Under torchrun the elastic agent already serves the TCP store at MASTER_ADDR:MASTER_PORT: mpt's ranks must join
// PyTorch's store as clients (rank 0 included) and train. Runs when Debian's python3-torch is installed.
#include <catch2/catch.hpp>

#include <unistd.h>

#include <cstdlib>

#include "tests/support/helpers.h"

using namespace mpt::testing;

TEST_CASE("mpt ranks join a TCP store hosted by PyTorch, as under torchrun", "[slow][interop][dist]") {
  if (std::system("/usr/bin/python3 -c 'import torch.distributed' >/dev/null 2>&1") != 0) {
    WARN("python3-torch is not installed (scripts/setup.sh installs it): torchrun store check skipped");
    return;
  }
  const std::string dir = scratch_dir("torchrun-store");
  const std::string command = "/usr/bin/python3 " + source_path("tests/interop/torchrun_agent_store.py") +
                              " " + std::to_string(29000 + ::getpid() % 1000) + " " MPT_BINARY " train " + source_path("configs/mlp_fmnist_mixed.yaml") +
                              " train.max_steps=12 data.test_limit=500 --run-dir " + dir + " > " + dir +
                              "/../mpt-test-torchrun-store.log 2>&1";
  const int status = std::system(command.c_str());
  INFO(read_file_text(dir + "/../mpt-test-torchrun-store.log"));
  REQUIRE(status == 0);
  const nlohmann::json summary = read_json(dir + "/summary.json");
  CHECK(summary["status"] == "completed");
  CHECK(summary["distributed"]["world_size"] == 2);
  CHECK(summary["distributed"]["ranks_agree"] == true);
}
