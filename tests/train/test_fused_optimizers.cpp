// mpt's fused Adam/AdamW/SGD against LibTorch's: the same weights and state step after step, and each one's state
// loads into the other (checkpoints written before and after the change stay interchangeable).
#include <catch2/catch.hpp>

#include <sstream>

#include "core/train/fused_optimizers.h"

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

TEST_CASE("the fused SGD matches LibTorch's step for step and shares its state", "[fast][train]") {
  using torch::optim::SGDOptions;
  check_matches<torch::optim::SGD, mpt::train::FusedSgd>(SGDOptions(0.01));
  check_matches<torch::optim::SGD, mpt::train::FusedSgd>(SGDOptions(0.01).momentum(0.9).weight_decay(5e-4));
  check_matches<torch::optim::SGD, mpt::train::FusedSgd>(
      SGDOptions(0.01).momentum(0.9).nesterov(true).weight_decay(5e-4));
  check_matches<torch::optim::SGD, mpt::train::FusedSgd>(SGDOptions(0.02).momentum(0.5).dampening(0.3));
}

TEST_CASE("the fused optimizers take NHWC weights, and state saved in another layout", "[fast][train]") {
  // Convolution weights under model.channels_last: the loops must walk weight, gradient and state alike.
  auto make = [] {
    torch::manual_seed(5);
    return std::vector<torch::Tensor>{
        torch::randn({8, 3, 3, 3}).contiguous(torch::MemoryFormat::ChannelsLast).requires_grad_()};
  };
  auto step_both = [](std::vector<torch::Tensor>& a, std::vector<torch::Tensor>& b, torch::optim::Optimizer& oa,
                      torch::optim::Optimizer& ob, int steps) {
    for (int s = 0; s < steps; ++s) {
      for (auto* params : {&a, &b}) {
        (*params)[0].mutable_grad() = torch::Tensor();
        ((*params)[0].pow(3) * torch::arange(216).view({8, 3, 3, 3}) / 216.0).sum().backward();
      }
      oa.step(), ob.step();
    }
  };
  auto expected = make(), actual = make();
  torch::optim::SGD reference(expected, torch::optim::SGDOptions(0.01).momentum(0.9).nesterov(true));
  mpt::train::FusedSgd fused(actual, torch::optim::SGDOptions(0.01).momentum(0.9).nesterov(true));
  step_both(expected, actual, reference, fused, 5);
  CHECK(torch::allclose(actual[0], expected[0], 1e-5, 1e-5));

  auto adam_expected = make(), adam_actual = make();
  torch::optim::Adam adam_reference(adam_expected, torch::optim::AdamOptions(0.01));
  mpt::train::FusedAdam adam_fused(adam_actual, torch::optim::AdamOptions(0.01));
  step_both(adam_expected, adam_actual, adam_reference, adam_fused, 3);
  // A contiguous (NCHW-ordered) moment, as a checkpoint from a contiguous model would hold, is re-laid once.
  for (auto& item : adam_fused.state()) {
    auto& state = static_cast<torch::optim::AdamParamState&>(*item.second);
    state.exp_avg(state.exp_avg().contiguous());
  }
  step_both(adam_expected, adam_actual, adam_reference, adam_fused, 3);
  CHECK(torch::allclose(adam_actual[0], adam_expected[0], 1e-5, 1e-5));
}
