// ResNet: torchvision's exact parameter counts and state-dict names, shapes, and norms in FP32 under BF16.
#include <catch2/catch.hpp>

#include "models/resnet.h"
#include "models/registry.h"
#include "precision/autocast.h"
#include "tests/support/helpers.h"

using namespace mpt::models;

namespace {

using mpt::testing::image_sample;

int64_t parameter_count(torch::nn::Module& model) {
  int64_t n = 0;
  for (const auto& p : model.parameters()) n += p.numel();
  return n;
}

Model resnet(const std::string& name, int64_t channels, int64_t classes, bool small = false,
             const std::vector<std::string>& fp32 = {"fc", "*bn*", "*downsample.1"}) {
  ModelConfig config;
  config.name = name;
  config.options.set("model.small_input", small);
  return build_model(config, image_sample(channels, 224, classes), mpt::precision::ModulePolicy(fp32));
}

}  // namespace

TEST_CASE("resnet50 matches torchvision: 25,557,032 parameters, 320 state-dict keys, same names", "[fast][models]") {
  Model model = resnet("resnet50", 3, 1000);
  CHECK(parameter_count(*model) == 25557032);
  CHECK(model->parameters().size() == 161);
  auto params = model->named_parameters();
  auto buffers = model->named_buffers();
  CHECK(params.size() + buffers.size() == 320);
  for (const char* name :
       {"conv1.weight", "bn1.weight", "layer1.0.conv1.weight", "layer1.0.downsample.0.weight",
        "layer1.0.downsample.1.bias", "layer3.5.bn3.weight", "layer4.2.conv3.weight", "fc.weight", "fc.bias"})
    CHECK(params.contains(name));
  for (const char* name : {"bn1.running_mean", "layer4.2.bn3.running_var", "layer2.0.downsample.1.num_batches_tracked"})
    CHECK(buffers.contains(name));
  CHECK(params["layer2.0.conv2.weight"].sizes() == torch::IntArrayRef({128, 128, 3, 3}));  // v1.5: stride here
}

TEST_CASE("the other depths have torchvision's parameter counts", "[fast][models]") {
  CHECK(parameter_count(*resnet("resnet18", 3, 1000)) == 11689512);
  CHECK(parameter_count(*resnet("resnet34", 3, 1000)) == 21797672);
  CHECK(parameter_count(*resnet("resnet101", 3, 1000)) == 44549160);
}

TEST_CASE("a small-input ResNet-18 on 1-channel 28 px images gives logits, norms FP32 under BF16", "[fast][models]") {
  Model model = resnet("resnet18", 1, 10, /*small=*/true);
  model->eval();
  torch::Tensor logits;
  {
    mpt::precision::AutocastScope autocast(torch::kCPU, torch::kBFloat16);
    logits = model->forward(torch::randn({2, 1, 28, 28}));
  }
  CHECK(logits.sizes() == torch::IntArrayRef({2, 10}));
  CHECK(logits.dtype() == torch::kFloat);  // fc is an FP32 island
  CHECK(torch::isfinite(logits).all().item<bool>());
}

TEST_CASE("batch norm on BF16 activations computes in FP32: the output is FP32 batch norm's, rounded",
          "[fast][models]") {
  // Mixed-precision ResNets hand BF16 conv outputs to FP32-weighted batch norms (src/models/resnet.cpp); this pins
  // the LibTorch behaviour that relies on, so a LibTorch whose kernel rounds in between fails here.
  torch::manual_seed(3);
  for (bool channels_last : {false, true}) {
    torch::nn::BatchNorm2d mixed(16), reference(16);
    torch::Tensor x = (torch::randn({8, 16, 6, 6}) * 3 + 5).to(torch::kBFloat16);
    if (channels_last) x = x.contiguous(torch::MemoryFormat::ChannelsLast);
    const torch::Tensor x_fp32 = x.to(torch::kFloat);
    const torch::Tensor y = mixed->forward(x), y_reference = reference->forward(x_fp32);
    CHECK(y.dtype() == torch::kBFloat16);
    CHECK(y.to(torch::kFloat).equal(y_reference.to(torch::kBFloat16).to(torch::kFloat)));
    CHECK(mixed->running_var.dtype() == torch::kFloat);
    CHECK(torch::allclose(mixed->running_mean, reference->running_mean, 0.0, 1e-6));
    CHECK(torch::allclose(mixed->running_var, reference->running_var, 1e-6, 1e-6));
    const torch::Tensor grad = torch::randn_like(y_reference).to(torch::kBFloat16);
    y.backward(grad);
    y_reference.backward(grad.to(torch::kFloat));
    CHECK(mixed->weight.grad().dtype() == torch::kFloat);
    CHECK(torch::allclose(mixed->weight.grad(), reference->weight.grad(), 1e-5, 1e-5));
    CHECK(torch::allclose(mixed->bias.grad(), reference->bias.grad(), 1e-5, 1e-5));
  }
}

TEST_CASE("zero_init_residual zeroes each block's last norm", "[fast][models]") {
  ModelConfig config;
  config.name = "resnet18";
  config.options.set("model.zero_init_residual", true);
  Model model = build_model(config, image_sample(3, 224, 10), mpt::precision::ModulePolicy());
  auto params = model->named_parameters();
  CHECK(params["layer1.0.bn2.weight"].abs().sum().item<double>() == 0.0);
  CHECK(params["layer1.0.bn1.weight"].abs().sum().item<double>() > 0.0);
}

TEST_CASE("forward MACs: ResNet-50 at 224 px is torchvision's 4.09 GMACs", "[fast][models]") {
  Model model = resnet("resnet50", 3, 1000);
  const int64_t macs = model->forward_macs(image_sample(3, 224, 1000));
  CHECK(macs == Approx(4.09e9).epsilon(0.01));
  CHECK(resnet("resnet18", 3, 1000)->forward_macs(image_sample(3, 224, 1000)) == Approx(1.81e9).epsilon(0.01));
}

TEST_CASE("channels_last keeps the same function: same weights, same logits, NHWC layout", "[fast][models]") {
  ModelConfig config;
  config.name = "resnet18";
  config.options.set("model.small_input", true);
  torch::manual_seed(3);
  Model nchw = build_model(config, image_sample(3, 224, 10), mpt::precision::ModulePolicy());
  config.options.set("model.channels_last", true);
  torch::manual_seed(3);
  Model nhwc = build_model(config, image_sample(3, 224, 10), mpt::precision::ModulePolicy());
  auto weight = nhwc->named_parameters()["layer2.0.conv1.weight"];
  CHECK(weight.is_contiguous(torch::MemoryFormat::ChannelsLast));
  CHECK_FALSE(weight.is_contiguous());
  CHECK(torch::equal(weight, nchw->named_parameters()["layer2.0.conv1.weight"]));  // same values, other layout
  nchw->eval(), nhwc->eval();
  const torch::Tensor x = torch::randn({2, 3, 32, 32});
  CHECK(torch::allclose(nhwc->forward(x), nchw->forward(x), /*rtol=*/1e-4, /*atol=*/1e-5));
}

TEST_CASE("convolutions over small channels-last images, run as matmuls, match the convolutions", "[fast][models]") {
  // At 64 px resnet50's layer3 runs at 4 x 4 and layer4 at 2 x 2, where channels-last 1x1 and 3x3 convolutions
  // (strided ones and the downsample too) become one matrix product each (FP32 at 2 x 2 outputs, BF16 up to
  // 7 x 7 for 1x1 and 4 x 4 for 3x3); the NCHW twin convolves throughout.
  ModelConfig config;
  config.name = "resnet50";
  torch::manual_seed(5);
  Model nchw = build_model(config, image_sample(3, 64, 10), mpt::precision::ModulePolicy());
  config.options.set("model.channels_last", true);
  torch::manual_seed(5);
  Model nhwc = build_model(config, image_sample(3, 64, 10), mpt::precision::ModulePolicy());
  const torch::Tensor x = torch::randn({2, 3, 64, 64});

  // Logits and a layer4 1x1 weight's gradient; eval mode, as training-mode batch norm over 2 x 2 x 2 values
  // would amplify every rounding difference.
  auto run = [&](Model& model, torch::ScalarType dtype) {
    model->eval();
    model->zero_grad();
    torch::Tensor out;
    {
      mpt::precision::AutocastScope autocast(torch::kCPU, dtype);
      out = model->forward(x);
    }
    out.to(torch::kFloat).square().sum().backward();
    // A 1x1, a strided 3x3 (4 x 4 -> 2 x 2), a 3x3 at 2 x 2, a downsample; and the 1x1s before a 3x3 at 2 x 2
    // and at 4 x 4, whose gradients pass back through the 3x3's patches.
    std::vector<torch::Tensor> grads;
    for (const char* name : {"layer4.0.conv1.weight", "layer4.0.conv2.weight", "layer4.1.conv2.weight",
                             "layer4.0.downsample.0.weight", "layer4.1.conv1.weight", "layer3.5.conv1.weight"})
      grads.push_back(model->named_parameters()[name].grad().contiguous().view(-1));
    return std::make_pair(out.to(torch::kFloat), torch::cat(grads));
  };
  auto relative = [](const torch::Tensor& a, const torch::Tensor& b) {
    return ((a - b).norm() / b.norm()).item<double>();
  };
  const auto [reference_logits, reference_grad] = run(nchw, torch::kFloat);
  const auto [logits, grad] = run(nhwc, torch::kFloat);
  CHECK(relative(logits, reference_logits) < 1e-5);
  CHECK(relative(grad, reference_grad) < 1e-4);
  // In BF16 both paths round; the matmul path must be no further from FP32 than the convolutions are.
  const auto [conv_logits, conv_grad] = run(nchw, torch::kBFloat16);
  const auto [matmul_logits, matmul_grad] = run(nhwc, torch::kBFloat16);
  CHECK(relative(matmul_logits, reference_logits) < 1.5 * relative(conv_logits, reference_logits) + 1e-3);
  INFO("conv " << relative(conv_grad, reference_grad) << " matmul " << relative(matmul_grad, reference_grad));
  CHECK(relative(matmul_grad, reference_grad) < 1.5 * relative(conv_grad, reference_grad) + 1e-3);
}
