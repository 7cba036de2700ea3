// mpt's scale rule against PyTorch's own _amp_update_scale_ (GradScaler's kernel) on the same overflow sequence,
// on the CPU here and on CUDA where a GPU is visible: the same scale after every step, factors that are not
// powers of two included (GradScaler keeps the scale in FP32).
#include <catch2/catch.hpp>

#include <torch/cuda.h>

#include "precision/loss_scaler.h"
#include "tests/support/helpers.h"

using namespace mpt::precision;

namespace {

void compare_with_kernel(torch::Device device, double growth, double backoff) {
  LossScaleConfig config;
  config.init = 65536.0;
  config.growth_factor = growth;
  config.backoff_factor = backoff;
  config.growth_interval = 3;
  config.min_scale = 0.0;  // GradScaler has neither floor nor ceiling
  config.max_scale = std::numeric_limits<double>::infinity();
  LossScaler mine(config);
  LossScaleState start;
  start.scale = config.init;
  mine.load_state(start);
  const auto options = torch::TensorOptions().device(device);
  torch::Tensor scale = torch::full({1}, config.init, options.dtype(torch::kFloat));
  torch::Tensor tracker = torch::zeros({1}, options.dtype(torch::kInt));
  // Overflows and clean runs, long enough to grow several times and to back off in a row.
  const std::vector<int> overflow = {0, 0, 0, 1, 0, 0, 0, 0, 0, 0, 1, 1, 1, 0, 0, 0, 0, 0, 0, 0, 0, 0, 1, 0, 0, 0};
  for (size_t step = 0; step < overflow.size(); ++step) {
    const torch::Tensor found = torch::full({1}, static_cast<float>(overflow[step]), options.dtype(torch::kFloat));
    at::_amp_update_scale_(scale, tracker, found, growth, backoff, config.growth_interval);
    mine.update(overflow[step] != 0);
    INFO("step " << step << ", growth " << growth << ", backoff " << backoff);
    CHECK(mine.scale() == static_cast<double>(scale.item<float>()));
    CHECK(mine.state().growth_tracker == tracker.item<int>());
  }
}

}  // namespace

TEST_CASE("the scale trace equals GradScaler's _amp_update_scale_ kernel on the CPU", "[fast][precision]") {
  compare_with_kernel(torch::kCPU, 2.0, 0.5);
  compare_with_kernel(torch::kCPU, 3.0, 0.3);
}

TEST_CASE("the scale trace equals GradScaler's _amp_update_scale_ kernel on CUDA", "[fast][gpu][precision]") {
  if (!torch::cuda::is_available()) MPT_SKIP("no CUDA device visible");
  compare_with_kernel(torch::kCUDA, 2.0, 0.5);
  compare_with_kernel(torch::kCUDA, 3.0, 0.3);
}

TEST_CASE("on CUDA the fused unscale kernel flags and unscales as the portable path does", "[fast][gpu][precision]") {
  if (!torch::cuda::is_available()) MPT_SKIP("no CUDA device visible");
  LossScaleConfig config;
  LossScaler scaler(config);
  LossScaleState state;
  state.scale = 1024.0;
  scaler.load_state(state);
  torch::manual_seed(5);
  for (const bool poisoned : {false, true}) {
    std::vector<torch::Tensor> cpu = {torch::randn({300}) * 1024, torch::randn({7, 9}) * 1024};
    if (poisoned) cpu[1][3][4] = std::numeric_limits<float>::infinity();
    std::vector<torch::Tensor> cuda;
    for (const auto& g : cpu) cuda.push_back(g.to(torch::kCUDA));
    const float cpu_flag = scaler.unscale_and_flag(cpu).item<float>();
    const float cuda_flag = scaler.unscale_and_flag(cuda).item<float>();
    CHECK((cpu_flag != 0) == poisoned);
    CHECK((cuda_flag != 0) == poisoned);
    for (size_t i = 0; i < cpu.size(); ++i) CHECK(torch::equal(cpu[i], cuda[i].cpu()));
  }
}
