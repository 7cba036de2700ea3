// Resolution: "mixed" and "auto" become concrete choices for the hardware, and cross-key problems are caught.
#include <catch2/catch.hpp>

#include "common/error.h"
#include "config/load.h"
#include "run/resolve.h"
#include "tests/support/helpers.h"

using namespace mpt::config;
using namespace mpt::run;

namespace {

Spec resolved(const std::vector<std::string>& overrides, const mpt::hardware::Facts& hardware) {
  Spec spec = parse_spec("data:\n  root: " + mpt::testing::kFashionMnistRoot + "\n", "/specs/exp.yaml", overrides);
  resolve_spec(spec, hardware);
  return spec;
}

std::string resolve_error(const std::vector<std::string>& overrides, const mpt::hardware::Facts& hardware) {
  try {
    resolved(overrides, hardware);
  } catch (const mpt::UsageError& e) {
    return e.what();
  }
  FAIL("expected a resolution error");
  return "";
}

const mpt::hardware::Facts kBf16Cpu{false, 0, true};
const mpt::hardware::Facts kPlainCpu{false, 0, false};
const mpt::hardware::Facts kVolta{true, 70, true};
const mpt::hardware::Facts kHopper{true, 90, true};

}  // namespace

TEST_CASE("mixed resolves by hardware", "[fast][config]") {
  CHECK(resolved({"precision.mode=mixed"}, kBf16Cpu).get_string("precision.mode") == "mixed_bf16");
  CHECK(resolved({"precision.mode=mixed"}, kVolta).get_string("precision.mode") == "mixed_fp16");
  CHECK(resolved({"precision.mode=mixed"}, kHopper).get_string("precision.mode") == "mixed_bf16");
  // Without native BF16 the CPU still trains with BF16's numerics (emulated), and says so.
  const Spec plain = resolved({"precision.mode=mixed"}, kPlainCpu);
  CHECK(plain.get_string("precision.mode") == "mixed_bf16");
  CHECK_THAT(plain.origin("precision.mode"), Catch::Contains("emulated"));
}

TEST_CASE("device auto and loss-scale auto resolve, and say why", "[fast][config]") {
  Spec cpu = resolved({}, kBf16Cpu);
  CHECK(cpu.get_string("device.type") == "cpu");
  CHECK(cpu.get_string("precision.loss_scale.mode") == "none");
  CHECK(cpu.get_string("experiment.name") == "exp");
  Spec gpu = resolved({"precision.mode=mixed"}, kVolta);
  CHECK(gpu.get_string("device.type") == "cuda");
  CHECK(gpu.get_string("precision.loss_scale.mode") == "dynamic");
  CHECK_THAT(gpu.origin("precision.mode"), Catch::Contains("compute capability 7.0"));
}

TEST_CASE("strategy auto: master weights for mixed precision on the CPU, autocast on a GPU and in FP32",
          "[fast][config]") {
  Spec cpu = resolved({"precision.mode=mixed", "precision.strategy=auto"}, kBf16Cpu);
  CHECK(cpu.get_string("precision.strategy") == "master_weights");
  CHECK_THAT(cpu.origin("precision.strategy"), Catch::Contains("auto: mixed precision on the CPU"));
  CHECK(resolved({"precision.mode=fp32", "precision.strategy=auto"}, kBf16Cpu).get_string("precision.strategy") ==
        "autocast");
  Spec gpu = resolved({"precision.mode=mixed", "precision.strategy=auto"}, kHopper);
  CHECK(gpu.get_string("precision.strategy") == "autocast");
  CHECK_THAT(gpu.origin("precision.strategy"), Catch::Contains("on a GPU"));
  CHECK(resolved({"precision.mode=mixed"}, kBf16Cpu).get_string("precision.strategy") == "autocast");  // the default
}

TEST_CASE("impossible combinations are spec errors, all at once", "[fast][config]") {
  std::string message =
      resolve_error({"precision.mode=mixed_fp16", "train.epochs=0", "data.root=/nonexistent"}, kBf16Cpu);
  CHECK_THAT(message, Catch::Contains("3 errors"));
  CHECK_THAT(message, Catch::Contains("mixed_fp16 needs device.type cuda"));
  CHECK_THAT(message, Catch::Contains("train.epochs and train.max_steps are both 0"));
  CHECK_THAT(message, Catch::Contains("data.root = /nonexistent: no such folder"));
  CHECK_THAT(resolve_error({"device.type=cuda"}, kBf16Cpu), Catch::Contains("no CUDA device"));
  CHECK_THAT(resolve_error({"precision.strategy=master_weights"}, kBf16Cpu),
             Catch::Contains("needs a mixed precision.mode"));
  CHECK_THAT(resolve_error({"precision.loss_scale.init=0.5"}, kBf16Cpu),
             Catch::Contains("between precision.loss_scale.min_scale and max_scale"));
}
