// The checkpoints PyTorch users bring to model.init_from, written by the real torch: DDP's and torch.compile's
// name prefixes, a training script's {"model", "args": Namespace, ...}, an ImageNet-sized head skipped with
// model.init_skip, the legacy format refused with the command that converts it, and a pickle whose object
// would run a shell command read without running it.
#include <catch2/catch.hpp>

#include <filesystem>

#include "common/error.h"
#include "io/weights.h"
#include "tests/support/helpers.h"

using namespace mpt;
using mpt::testing::error_of;

namespace {

struct Net : torch::nn::Module {
  torch::nn::Linear body{nullptr}, fc{nullptr};
  Net() {
    body = register_module("body", torch::nn::Linear(4, 8));
    fc = register_module("fc", torch::nn::Linear(8, 10));  // fine-tuning: 10 classes, not 1000
  }
};

}  // namespace

TEST_CASE("PyTorch training checkpoints load for their tensors, prefixes dropped, mismatched heads skipped by glob",
          "[fast][interop]") {
  if (const std::string missing = testing::python_missing("torch"); !missing.empty()) MPT_SKIP(missing);
  const std::string dir = testing::scratch_dir("torch-checkpoints");
  const auto written =
      testing::run_python(testing::source_path("tests/interop/torch_checkpoints_reference.py") + " " + dir);
  INFO(written.output);
  REQUIRE(written.exit_code == 0);
  const torch::Tensor expected = io::read_weights(dir + "/plain.pt").front().second;  // body.weight

  for (const char* file : {"plain.pt", "ddp.pt", "compiled.pt", "training.pt"}) {
    CAPTURE(file);
    Net net;
    CHECK_THAT(error_of([&] { io::init_from_weights(net, io::read_weights(dir + "/" + file), file); }),
               Catch::Contains("'fc.weight' is [10, 8]") && Catch::Contains("model.init_skip (e.g. [fc.*])"));
    const io::InitReport report = io::init_from_weights(net, io::read_weights(dir + "/" + file), file, {"fc.*"});
    CHECK(report.loaded == 2);
    CHECK(report.skipped == std::vector<std::string>{"fc.weight", "fc.bias"});
    CHECK(report.unused.empty());
    CHECK(torch::equal(net.body->weight, expected));
  }

  CHECK_THAT(error_of([&] { io::read_weights(dir + "/legacy.pt"); }),
             Catch::Contains("legacy torch.save format") && Catch::Contains("torch.load('" + dir + "/legacy.pt'"));

  Net net;
  CHECK_THAT(error_of([&] { io::init_from_weights(net, io::read_weights(dir + "/evil.pt"), "evil.pt"); }),
             Catch::Contains("'payload' is a pickled") && Catch::Contains("object, not a tensor"));
  CHECK_FALSE(std::filesystem::exists(dir + "/EXECUTED"));
}
