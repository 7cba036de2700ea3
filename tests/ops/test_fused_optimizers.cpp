// mpt's fused Adam/AdamW/SGD against LibTorch's: the same weights and state step after step, and each one's state
// loads into the other (checkpoints written before and after the change stay interchangeable). Under
// master_weights, the one-pass step_masters against the copies it replaces.
#include <catch2/catch.hpp>

#include <sstream>

#include "models/mlp.h"
#include "ops/fused_optimizers.h"
#include "ops/gradient_check.h"
#include "ops/multi_tensor_step.h"
#include "precision/autocast.h"
#include "precision/master_weights.h"

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

// The step under test: the optimizer's own (the one-pass CPU loops), or the multi-tensor step GPU parameters take.
enum class Path { own_step, multi_tensor };

void take_step(torch::optim::Optimizer& optimizer, Path path) {
  if (path == Path::own_step)
    optimizer.step();
  else
    REQUIRE(mpt::ops::multi_tensor_step(optimizer));
}

template <typename Reference, typename Fused, typename Options>
void check_matches(const Options& options, Path path = Path::own_step) {
  auto expected = make_parameters(), actual = make_parameters();
  Reference reference(expected, options);
  Fused fused(actual, options);
  for (int step = 1; step <= 25; ++step) {
    backward_step(expected, step), backward_step(actual, step);
    reference.step(), take_step(fused, path);
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
  reference.step(), take_step(resumed, path);
  for (size_t i = 0; i < expected.size(); ++i) CHECK(torch::allclose(resumed_parameters[i], expected[i], 1e-5, 1e-5));
}

}  // namespace

TEST_CASE("the fused Adam and AdamW match LibTorch's step for step and share their state", "[fast][train]") {
  check_matches<torch::optim::Adam, mpt::ops::FusedAdam>(torch::optim::AdamOptions(0.01));
  check_matches<torch::optim::Adam, mpt::ops::FusedAdam>(torch::optim::AdamOptions(0.01).weight_decay(0.1));
  check_matches<torch::optim::AdamW, mpt::ops::FusedAdamW>(torch::optim::AdamWOptions(0.01).weight_decay(0.05));
  check_matches<torch::optim::AdamW, mpt::ops::FusedAdamW>(
      torch::optim::AdamWOptions(0.01).betas({0.8, 0.95}).eps(1e-6).weight_decay(0.0));
}

TEST_CASE("the fused SGD matches LibTorch's step for step and shares its state", "[fast][train]") {
  using torch::optim::SGDOptions;
  check_matches<torch::optim::SGD, mpt::ops::FusedSgd>(SGDOptions(0.01));
  check_matches<torch::optim::SGD, mpt::ops::FusedSgd>(SGDOptions(0.01).momentum(0.9).weight_decay(5e-4));
  check_matches<torch::optim::SGD, mpt::ops::FusedSgd>(
      SGDOptions(0.01).momentum(0.9).nesterov(true).weight_decay(5e-4));
  check_matches<torch::optim::SGD, mpt::ops::FusedSgd>(SGDOptions(0.02).momentum(0.5).dampening(0.3));
}

TEST_CASE("the multi-tensor step GPU parameters take matches LibTorch's Adam, AdamW and SGD", "[fast][train]") {
  // On the CPU the _foreach ops run tensor by tensor: this checks the arithmetic and the state, not the speed.
  using torch::optim::SGDOptions;
  check_matches<torch::optim::Adam, mpt::ops::FusedAdam>(torch::optim::AdamOptions(0.01), Path::multi_tensor);
  check_matches<torch::optim::Adam, mpt::ops::FusedAdam>(torch::optim::AdamOptions(0.01).weight_decay(0.1),
                                                         Path::multi_tensor);
  check_matches<torch::optim::AdamW, mpt::ops::FusedAdamW>(torch::optim::AdamWOptions(0.01).weight_decay(0.05),
                                                           Path::multi_tensor);
  check_matches<torch::optim::SGD, mpt::ops::FusedSgd>(SGDOptions(0.01), Path::multi_tensor);
  check_matches<torch::optim::SGD, mpt::ops::FusedSgd>(SGDOptions(0.01).momentum(0.9).nesterov(true).weight_decay(5e-4),
                                                       Path::multi_tensor);
  check_matches<torch::optim::SGD, mpt::ops::FusedSgd>(SGDOptions(0.02).momentum(0.5).dampening(0.3),
                                                       Path::multi_tensor);

  // amsgrad keeps LibTorch's own step, untouched by the multi-tensor one.
  auto parameters = make_parameters();
  mpt::ops::FusedAdam amsgrad(parameters, torch::optim::AdamOptions(0.01).amsgrad(true));
  backward_step(parameters, 1);
  const torch::Tensor before = parameters[0].detach().clone();
  CHECK_FALSE(mpt::ops::multi_tensor_step(amsgrad));
  CHECK(torch::equal(parameters[0], before));
  CHECK(amsgrad.state().empty());
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
  mpt::ops::FusedSgd fused(actual, torch::optim::SGDOptions(0.01).momentum(0.9).nesterov(true));
  step_both(expected, actual, reference, fused, 5);
  CHECK(torch::allclose(actual[0], expected[0], 1e-5, 1e-5));

  auto adam_expected = make(), adam_actual = make();
  torch::optim::Adam adam_reference(adam_expected, torch::optim::AdamOptions(0.01));
  mpt::ops::FusedAdam adam_fused(adam_actual, torch::optim::AdamOptions(0.01));
  step_both(adam_expected, adam_actual, adam_reference, adam_fused, 3);
  // A contiguous (NCHW-ordered) moment, as a checkpoint from a contiguous model would hold, is re-laid once.
  for (auto& item : adam_fused.state()) {
    auto& state = static_cast<torch::optim::AdamParamState&>(*item.second);
    state.exp_avg(state.exp_avg().contiguous());
  }
  step_both(adam_expected, adam_actual, adam_reference, adam_fused, 3);
  CHECK(torch::allclose(adam_actual[0], adam_expected[0], 1e-5, 1e-5));
}

namespace {

// An MLP under master_weights: BF16 hidden layers, an FP32 head (an island, its own master).
struct MasterModel {
  std::shared_ptr<mpt::models::MlpImpl> model;
  std::unique_ptr<mpt::precision::MasterWeights> master;
  std::unique_ptr<torch::optim::Optimizer> optimizer;

  template <typename Optimizer, typename Options>
  static MasterModel make(const Options& options) {
    torch::manual_seed(21);
    mpt::models::MlpConfig config;
    config.in_features = 40;
    config.hidden_sizes = {300, 70};  // 12,000 and 21,000 elements: more than one parallel task each
    config.num_classes = 5;
    const mpt::precision::ModulePolicy policy(std::vector<std::string>{"head"});
    MasterModel m;
    m.model = std::make_shared<mpt::models::MlpImpl>(config, policy);
    m.master = std::make_unique<mpt::precision::MasterWeights>(*m.model, policy, torch::kBFloat16);
    m.optimizer = std::make_unique<Optimizer>(m.master->masters().values(), options);
    return m;
  }

  // Forward and backward of a loss scaled by `scale`, leaving BF16 gradients on the model.
  void backward(int step, double scale) {
    for (auto& p : model->parameters()) p.mutable_grad() = torch::Tensor();
    torch::manual_seed(100 + step);
    const torch::Tensor inputs = torch::randn({16, 40}), targets = torch::randint(5, {16});
    torch::Tensor logits;
    {
      mpt::precision::AutocastScope autocast(torch::kCPU, torch::kBFloat16);
      logits = model->forward(inputs);
    }
    (torch::nn::functional::cross_entropy(logits.to(torch::kFloat), targets) * scale).backward();
  }
};

template <typename Optimizer, typename Options>
void check_step_masters_matches_copies(const Options& options, double max_norm) {
  const double scale = 1024.0;
  MasterModel copies = MasterModel::make<Optimizer>(options), fused = MasterModel::make<Optimizer>(options);
  const auto stepper = mpt::ops::master_stepper(*fused.optimizer, fused.master->pairs());
  REQUIRE(stepper);
  for (int step = 1; step <= 6; ++step) {
    // The unfused path: FP32 gradient copies, unscale and clip them, step, copy the masters back.
    copies.backward(step, scale);
    copies.master->grads_to_masters();
    std::vector<torch::Tensor> master_grads;
    for (auto& p : copies.master->masters().values()) master_grads.push_back(p.grad());
    REQUIRE_FALSE(mpt::ops::unscale_check_and_clip(master_grads, scale, max_norm).nonfinite);
    copies.optimizer->step();
    copies.master->masters_to_model();

    // One read of the BF16 gradients, then one pass.
    fused.backward(step, scale);
    std::vector<torch::Tensor> model_grads;
    for (auto& p : fused.model->parameters()) model_grads.push_back(p.grad());
    const auto check = mpt::ops::check_gradients(model_grads, scale, max_norm);
    REQUIRE_FALSE(check.nonfinite);
    stepper->step(fused.master->pairs(), check.factor);
  }
  const auto expected = copies.master->masters(), actual = fused.master->masters();
  for (const auto& item : expected) {
    const torch::Tensor& got = actual[item.key()];
    INFO(item.key() << ": max |difference| " << (got - item.value()).abs().max().item<double>());
    CHECK(torch::allclose(got, item.value(), 1e-6, 1e-7));
  }
  // The model's BF16 weights are the masters rounded, as masters_to_model would write them.
  int low_precision = 0;
  for (const auto& pair : fused.master->pairs()) {
    if (pair.shared) continue;  // the FP32 head: its own master, updated in place
    ++low_precision;
    CHECK_FALSE(pair.master.grad().defined());  // no FP32 gradient copy was made
    CHECK(pair.model_param.scalar_type() == torch::kBFloat16);
    CHECK(pair.model_param.equal(pair.master.to(torch::kBFloat16)));
  }
  CHECK(low_precision == 4);  // two hidden layers' weights and biases
  // The masters' optimizer state is keyed as the unfused step keys it: a checkpoint holds the same.
  CHECK(fused.optimizer->state().size() == copies.optimizer->state().size());
}

}  // namespace

TEST_CASE("the one-pass master step equals the gradient copies, unscale, clip, step and copy back it replaces",
          "[fast][train]") {
  using namespace torch::optim;
  check_step_masters_matches_copies<mpt::ops::FusedAdam>(AdamOptions(0.01), /*max_norm=*/0.0);
  check_step_masters_matches_copies<mpt::ops::FusedAdam>(AdamOptions(0.01).weight_decay(0.1), 0.5);
  check_step_masters_matches_copies<mpt::ops::FusedAdamW>(AdamWOptions(0.01).weight_decay(0.05), 0.5);
  check_step_masters_matches_copies<mpt::ops::FusedSgd>(SGDOptions(0.05).momentum(0.9).weight_decay(5e-4), 0.5);
  check_step_masters_matches_copies<mpt::ops::FusedSgd>(SGDOptions(0.05), 0.0);
}

TEST_CASE("a master stepper is made only for what its loop can take, and refuses a gradient laid out otherwise",
          "[fast][train]") {
  MasterModel m = MasterModel::make<mpt::ops::FusedAdam>(torch::optim::AdamOptions(0.01));
  const auto stepper = mpt::ops::master_stepper(*m.optimizer, m.master->pairs());
  CHECK(stepper);
  // LibTorch's own Adam has no such step.
  torch::optim::Adam plain(m.master->masters().values(), torch::optim::AdamOptions(0.01));
  CHECK_FALSE(mpt::ops::master_stepper(plain, m.master->pairs()));
  // AMSGrad keeps a state the loop does not.
  mpt::ops::FusedAdam amsgrad(m.master->masters().values(), torch::optim::AdamOptions(0.01).amsgrad(true));
  CHECK_FALSE(mpt::ops::master_stepper(amsgrad, m.master->pairs()));
  // A gradient laid out unlike its master breaks autograd's layout contract: the step refuses it loudly.
  m.backward(1, 1.0);
  torch::Tensor& grad = m.model->named_parameters()["hidden.0.weight"].mutable_grad();
  grad = grad.t().contiguous().t();
  CHECK_THROWS_WITH(stepper->step(m.master->pairs(), 1.0), Catch::Contains("not laid out like its weight"));
}
