// Training on a GPU end to end (label gpu; skipped without one): FP16 with dynamic loss scaling, where the
// overflows are real, backs off and grows, skips those steps and converges; BF16 completes with no skips.
#include <catch2/catch.hpp>

#include <torch/cuda.h>

#include "tests/support/helpers.h"

using namespace mpt::testing;

TEST_CASE("on CUDA mixed_fp16 training backs off on real overflows, grows, and converges", "[slow][gpu]") {
  if (!torch::cuda::is_available()) MPT_SKIP("no CUDA device visible");
  const std::string dir = scratch_dir("gpu-fp16");
  // A scale of 2^30 overflows FP16 gradients at once: the first steps back off for real.
  const CommandResult run =
      run_mpt({"train", source_path("configs/mlp_fmnist_mixed.yaml"), "device.type=cuda", "precision.mode=mixed_fp16",
               "precision.loss_scale.init=1073741824", "precision.loss_scale.growth_interval=100",
               "train.max_steps=600", "data.test_limit=2000", "--run-dir", dir});
  INFO(run.output);
  REQUIRE(run.exit_code == 0);
  const nlohmann::json summary = read_json(dir + "/summary.json");
  CHECK(summary["device"] == "cuda");
  CHECK(summary["precision"] == "mixed_fp16");
  CHECK(summary["loss_scale"]["backoffs"].get<int64_t>() >= 1);
  CHECK(summary["loss_scale"]["growths"].get<int64_t>() >= 1);
  CHECK(summary["skipped_steps"].get<int64_t>() >= 1);
  CHECK(summary["eval"]["accuracy"].get<double>() > 0.75);
}

TEST_CASE("on CUDA mixed_bf16 training completes without skipped steps", "[slow][gpu]") {
  if (!torch::cuda::is_available()) MPT_SKIP("no CUDA device visible");
  const std::string dir = scratch_dir("gpu-bf16");
  const CommandResult run =
      run_mpt({"train", source_path("configs/resnet18_fmnist_mixed.yaml"), "device.type=cuda",
               "precision.mode=mixed_bf16", "train.max_steps=100", "data.test_limit=2000", "--run-dir", dir});
  INFO(run.output);
  REQUIRE(run.exit_code == 0);
  const nlohmann::json summary = read_json(dir + "/summary.json");
  CHECK(summary["precision"] == "mixed_bf16");
  CHECK(summary["skipped_steps"] == 0);
}
