// The fused BF16 batch norm (+ residual add + ReLU): against the same math in FP64, LibTorch's running
// statistics, Inf/NaN passed on, the cases it leaves to LibTorch, and that a BF16 ResNet block uses it.
#include <catch2/catch.hpp>

#include <set>

#include "models/resnet.h"
#include "models/registry.h"
#include "ops/dispatch.h"
#include "ops/fused_batch_norm.h"
#include "precision/autocast.h"
#include "tests/support/helpers.h"

using mpt::ops::can_fuse_batch_norm;
using mpt::ops::fused_batch_norm;

namespace {

bool cpu_has_avx512_bf16() { return mpt::ops::avx512_bf16_kernels(); }

torch::Tensor bf16_channels_last(const torch::Tensor& t) {
  return t.to(torch::kBFloat16).contiguous(torch::MemoryFormat::ChannelsLast);
}

// Largest |a - b| over the elements, relative to max |b|.
double relative_max(const torch::Tensor& a, const torch::Tensor& b) {
  return ((a.to(torch::kDouble) - b.to(torch::kDouble)).abs().max() / b.to(torch::kDouble).abs().max()).item<double>();
}

}  // namespace

TEST_CASE("fused batch norm, add and ReLU match FP64 math: output, every gradient, running statistics",
          "[fast][models]") {
  if (!cpu_has_avx512_bf16()) {
    torch::nn::BatchNorm2d norm(16);
    CHECK_FALSE(can_fuse_batch_norm(*norm, bf16_channels_last(torch::randn({4, 16, 3, 3})), {}));
    return;
  }
  // 80 channels: one 64-channel tile and one 16-channel tile; 4 x 5 x 5 = 100 rows: two blocks, the second short.
  const int64_t channels = 80;
  for (const auto& [has_residual, relu] : {std::pair{false, false}, {false, true}, {true, true}, {true, false}}) {
    INFO("residual " << has_residual << ", relu " << relu);
    torch::manual_seed(7);
    torch::nn::BatchNorm2d norm(channels);
    {
      torch::NoGradGuard no_grad;
      norm->weight.uniform_(0.5, 2.0);
      norm->bias.uniform_(-1.0, 1.0);
    }
    // A mean far from 0 per channel, so centring matters.
    const torch::Tensor x =
        bf16_channels_last(torch::randn({4, channels, 5, 5}) * 3 + torch::randn({1, channels, 1, 1}) * 20)
            .requires_grad_();
    const torch::Tensor residual =
        has_residual ? bf16_channels_last(torch::randn({4, channels, 5, 5})).requires_grad_() : torch::Tensor();
    const torch::Tensor upstream = bf16_channels_last(torch::randn({4, channels, 5, 5}));
    REQUIRE(can_fuse_batch_norm(*norm, x, residual));

    const torch::Tensor y = fused_batch_norm(*norm, x, residual, relu);
    REQUIRE(y.scalar_type() == torch::kBFloat16);
    CHECK(y.is_contiguous(torch::MemoryFormat::ChannelsLast));
    y.backward(upstream);

    // The same math in FP64 on the same BF16 inputs.
    const torch::Tensor x64 = x.detach().to(torch::kDouble).requires_grad_();
    const torch::Tensor w64 = norm->weight.detach().to(torch::kDouble).requires_grad_();
    const torch::Tensor b64 = norm->bias.detach().to(torch::kDouble).requires_grad_();
    const torch::Tensor r64 = has_residual ? residual.detach().to(torch::kDouble).requires_grad_() : torch::Tensor();
    torch::Tensor y64 = torch::batch_norm(x64, w64, b64, {}, {}, /*training=*/true, 0.1, 1e-5, false);
    if (has_residual) y64 = y64 + r64;
    if (relu) y64 = torch::relu(y64);
    y64.backward(upstream.to(torch::kDouble));

    // The output is rounded once: within half a BF16 ulp (at most 2^-8 relative) of the FP64 value, plus FP32's
    // error.
    const torch::Tensor error = (y.to(torch::kDouble) - y64).abs();
    CHECK((error <= y64.abs() * std::ldexp(1.0, -8) + 1e-4).all().item<bool>());
    // The input gradient is rounded to BF16 once too; the parameters' gradients stay FP32.
    CHECK(x.grad().scalar_type() == torch::kBFloat16);
    CHECK(relative_max(x.grad(), x64.grad()) < 1e-2);
    CHECK(((x.grad().to(torch::kDouble) - x64.grad()).abs() <=
           x64.grad().abs() * std::ldexp(1.0, -8) + 1e-3 * x64.grad().abs().max())
              .all()
              .item<bool>());
    CHECK(relative_max(norm->weight.grad(), w64.grad()) < 1e-5);
    CHECK(relative_max(norm->bias.grad(), b64.grad()) < 1e-5);
    if (has_residual) {
      // The residual's gradient is the upstream gradient where the ReLU passed, exactly.
      const torch::Tensor passed = relu ? y.gt(0) : torch::ones_like(y, torch::kBool);
      CHECK(torch::equal(residual.grad(), torch::where(passed, upstream, torch::zeros_like(upstream))));
    }

    // Running statistics and the batch count, as LibTorch's module updates them from the same values.
    torch::nn::BatchNorm2d reference(channels);
    reference->forward(x.detach().to(torch::kFloat));
    CHECK(norm->num_batches_tracked.item<int64_t>() == 1);
    CHECK(torch::allclose(norm->running_mean, reference->running_mean, 1e-5, 1e-4));
    CHECK(torch::allclose(norm->running_var, reference->running_var, 1e-5, 1e-3));
  }
}

TEST_CASE("fused batch norm passes Inf and NaN on, so the loss scaler still sees an overflow", "[fast][models]") {
  if (!cpu_has_avx512_bf16()) return;  // the fused op is not reachable there (checked in the case above)
  torch::nn::BatchNorm2d norm(16);
  torch::Tensor x = torch::randn({2, 16, 4, 4});
  x[1][3][2][2] = std::numeric_limits<float>::infinity();  // channel 3's statistics become NaN
  x = bf16_channels_last(x).requires_grad_();
  const torch::Tensor y = fused_batch_norm(*norm, x, {}, /*relu=*/true);
  CHECK(y.select(1, 3).isnan().all().item<bool>());  // the ReLU keeps NaN
  CHECK(torch::isfinite(y.select(1, 4)).all().item<bool>());
  y.backward(torch::ones_like(y));
  CHECK_FALSE(torch::isfinite(x.grad()).all().item<bool>());
  CHECK_FALSE(torch::isfinite(norm->weight.grad()).all().item<bool>());

  // An overflowed upstream gradient reaches the parameters' gradients.
  torch::nn::BatchNorm2d clean(16);
  const torch::Tensor x2 = bf16_channels_last(torch::randn({2, 16, 4, 4})).requires_grad_();
  torch::Tensor upstream = torch::zeros({2, 16, 4, 4});
  upstream[0][5][1][1] = std::numeric_limits<float>::infinity();
  fused_batch_norm(*clean, x2, {}, /*relu=*/false).backward(bf16_channels_last(upstream));
  CHECK_FALSE(std::isfinite(clean->bias.grad()[5].item<float>()));
}

TEST_CASE("fused batch norm leaves to LibTorch what it does not cover", "[fast][models]") {
  torch::nn::BatchNorm2d norm(32);
  const torch::Tensor x = bf16_channels_last(torch::randn({2, 32, 4, 4}));
  CHECK(can_fuse_batch_norm(*norm, x, {}) == cpu_has_avx512_bf16());
  CHECK_FALSE(can_fuse_batch_norm(*norm, x.to(torch::kFloat), {}));                             // FP32
  CHECK_FALSE(can_fuse_batch_norm(*norm, x.contiguous(), {}));                                  // NCHW
  CHECK_FALSE(can_fuse_batch_norm(*norm, x, x.to(torch::kFloat)));                              // residual dtype
  CHECK_FALSE(can_fuse_batch_norm(*norm, x, bf16_channels_last(torch::randn({2, 32, 2, 2}))));  // residual size
  torch::nn::BatchNorm2d odd(24);
  CHECK_FALSE(can_fuse_batch_norm(*odd, bf16_channels_last(torch::randn({2, 24, 4, 4})), {}));   // 24 channels
  CHECK_FALSE(can_fuse_batch_norm(*norm, bf16_channels_last(torch::randn({1, 32, 1, 1})), {}));  // one value
  norm->eval();
  CHECK_FALSE(can_fuse_batch_norm(*norm, x, {}));
}

TEST_CASE("a BF16 channels-last ResNet-18 in training runs every norm through the fused op", "[fast][models]") {
  mpt::models::ModelConfig config;
  config.name = "resnet18";
  config.options.set("model.channels_last", true);
  torch::manual_seed(2);
  mpt::models::Model model =
      mpt::models::build_model(config, mpt::testing::image_sample(3, 32, 10), mpt::precision::ModulePolicy({"fc"}));
  model->train();
  const torch::Tensor x = torch::randn({8, 3, 32, 32});
  torch::Tensor logits;
  {
    mpt::precision::AutocastScope autocast(torch::kCPU, torch::kBFloat16);
    logits = model->forward(x);
  }
  // Count the graph's fused nodes: every norm of resnet18 (the stem, 2 per block, 3 downsamples) is one.
  std::vector<torch::autograd::Node*> pending{logits.grad_fn().get()};
  std::set<torch::autograd::Node*> seen;
  int fused = 0;
  while (!pending.empty()) {
    torch::autograd::Node* node = pending.back();
    pending.pop_back();
    if (!node || !seen.insert(node).second) continue;
    fused += node->name().find("FusedBatchNormFunction") != std::string::npos;
    for (const auto& edge : node->next_edges()) pending.push_back(edge.function.get());
  }
  CHECK(fused == (cpu_has_avx512_bf16() ? 1 + 2 * 8 + 3 : 0));
  torch::nn::functional::cross_entropy(logits, torch::randint(10, {8})).backward();
  for (const auto& item : model->named_parameters()) {
    INFO(item.key());
    const torch::Tensor& p = item.value();
    REQUIRE(p.grad().defined());
    CHECK(torch::isfinite(p.grad()).all().item<bool>());
  }
}
