// mpt's fused Adam/AdamW against LibTorch's: the same weights and state step after step, and each one's state
// loads into the other (checkpoints written before and after the change stay interchangeable).
#include <catch2/catch.hpp>

#include <sstream>

#include "core/train/fused_adam.h"

namespace {

// Three parameters, one without a gradient in some steps (a frozen head), trained on a fixed quadratic.
std::vector<torch::Tensor> make_parameters() {
  torch::manual_seed(11);
  return {torch::randn({300, 70}).requires_grad_(), torch::randn({70}).requires_grad_(),
          torch::randn({5, 5}).requires_grad_()};
}

void backward_step(const std::vector<torch::Tensor>& parameters, int step) {
  for (const auto& p : parameters) p.mutable_grad() = torch::Tensor();
  torch::Tensor loss = (parameters[0].pow(2) * 0.3).sum() + (parameters[1] - 1.0).pow(2).sum();
  if (step % 3 != 0) loss = loss + parameters[2].sin().sum();
  loss.backward();
}

template <typename Reference, typename Fused, typename Options>
void check_matches(const Options& options) {
  auto expected = make_parameters(), actual = make_parameters();
  Reference reference(expected, options);
  Fused fused(actual, options);
  for (int step = 1; step <= 25; ++step) {
    backward_step(expected, step), backward_step(actual, step);
    reference.step(), fused.step();
  }
  for (size_t i = 0; i < expected.size(); ++i) {
    INFO("parameter " << i << ": max |difference| " << (actual[i] - expected[i]).abs().max().item<double>());
    CHECK(torch::allclose(actual[i], expected[i], /*rtol=*/1e-5, /*atol=*/1e-5));  // 0.1% of one lr-0.01 step
  }

  // LibTorch's saved state continues in the fused optimizer, and the other way round.
  std::stringstream saved;
  {
    torch::serialize::OutputArchive archive;
    reference.save(archive);
    archive.save_to(saved);
  }
  auto resumed_parameters = make_parameters();
  for (size_t i = 0; i < expected.size(); ++i) resumed_parameters[i].detach().copy_(expected[i]);
  Fused resumed(resumed_parameters, options);
  torch::serialize::InputArchive archive;
  archive.load_from(saved);
  resumed.load(archive);
  backward_step(expected, 26), backward_step(resumed_parameters, 26);
  reference.step(), resumed.step();
  for (size_t i = 0; i < expected.size(); ++i)
    CHECK(torch::allclose(resumed_parameters[i], expected[i], 1e-5, 1e-5));
}

}  // namespace

TEST_CASE("the fused Adam and AdamW match LibTorch's step for step and share their state", "[fast][train]") {
  check_matches<torch::optim::Adam, mpt::train::FusedAdam>(torch::optim::AdamOptions(0.01));
  check_matches<torch::optim::Adam, mpt::train::FusedAdam>(torch::optim::AdamOptions(0.01).weight_decay(0.1));
  check_matches<torch::optim::AdamW, mpt::train::FusedAdamW>(torch::optim::AdamWOptions(0.01).weight_decay(0.05));
  check_matches<torch::optim::AdamW, mpt::train::FusedAdamW>(
      torch::optim::AdamWOptions(0.01).betas({0.8, 0.95}).eps(1e-6).weight_decay(0.0));
}
