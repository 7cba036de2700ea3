// ResNet forward. B = batch, C = channels, H x W = spatial size, K = classes.
#include "models/resnet.h"

#include <array>

#include "common/error.h"
#include "distributed/sync_batch_norm.h"
#include "ops/fused_batch_norm.h"

namespace mpt::models {
namespace {

constexpr int64_t kExpansion = 4;  // Bottleneck output channels = planes x 4

struct Layout {
  bool bottleneck;
  std::array<int64_t, 4> blocks;
};

Layout layout_for(int depth) {
  switch (depth) {
    case 18: return {false, {2, 2, 2, 2}};
    case 34: return {false, {3, 4, 6, 3}};
    case 50: return {true, {3, 4, 6, 3}};
    case 101: return {true, {3, 4, 23, 3}};
    case 152: return {true, {3, 8, 36, 3}};
  }
  throw UsageError("model: ResNet depth " + std::to_string(depth) + " is not one of 18, 34, 50, 101, 152");
}

// MACs of `c` on a height x width input (padding kernel/2, as every conv here); updates the size to the output's.
int64_t conv_macs(const torch::nn::Conv2d& c, int64_t& height, int64_t& width) {
  const auto& o = c->options;
  const int64_t k = (*o.kernel_size())[0], stride = (*o.stride())[0];
  height = (height + 2 * (k / 2) - k) / stride + 1;
  width = (width + 2 * (k / 2) - k) / stride + 1;
  return o.in_channels() * o.out_channels() * k * k * height * width;
}

torch::nn::Conv2d conv(int64_t in, int64_t out, int64_t kernel, int64_t stride) {
  return torch::nn::Conv2d(torch::nn::Conv2dOptions(in, out, kernel).stride(stride).padding(kernel / 2).bias(false));
}

// Batch norm on the conv's output, whatever its dtype. Under mixed precision (unless the policy makes the norm an
// FP32 island) that output is BF16/FP16, and the layer's weights and running statistics stay FP32: LibTorch's CPU
// kernel and cuDNN then compute the statistics and the normalisation in FP32 and round only the result, as
// PyTorch AMP's batch norm does (tested bit-equal to FP32 batch norm rounded to BF16). This saves casting every
// activation to FP32 and back, a sizeable part of a ResNet-50 BF16 step (docs/findings.md). LibTorch's CPU
// inference kernel was found to round in between (2 ulp off), so evaluation normalises an FP32 copy.
torch::Tensor batch_norm(torch::nn::BatchNorm2dImpl& norm, const torch::Tensor& x, distributed::Group* group) {
  const bool low_precision_eval = !norm.is_training() && x.scalar_type() != norm.weight.scalar_type();
  return distributed::sync_batch_norm(norm, low_precision_eval ? x.to(norm.weight.scalar_type()) : x, group);
}

// relu?(batch_norm(x) + residual?) (residual may be undefined). Where ops::fused_batch_norm takes it (BF16 training on
// an AVX512-BF16 CPU) the three are one op with half the passes over memory; that needs a runner that adds
// nothing around the norm (no FP32 island, no numerics check or probe, which would see the sum) and a norm that is not
// synchronised across ranks.
torch::Tensor norm_add_relu(torch::nn::BatchNorm2dImpl& norm, const precision::ModuleRunner& runner,
                            const torch::Tensor& x, const torch::Tensor& residual, bool relu,
                            distributed::Group* group) {
  const bool local = !group || !group->distributed();
  if (!runner.keep_fp32 && !runner.monitor && !runner.probed() && local && ops::can_fuse_batch_norm(norm, x, residual))
    return ops::fused_batch_norm(norm, x, residual, relu);
  torch::Tensor out = runner(x, [&](const torch::Tensor& h) { return batch_norm(norm, h, group); });
  if (residual.defined()) out = out + residual;
  return relu ? torch::relu(out) : out;
}

// oneDNN's CPU convolutions were measured slowest on small images, where the same products as one matrix
// multiplication ran several times faster (forward + backward, channels-last; docs/findings.md). Hence the largest
// output sizes that take the matmul: in BF16 up to 7 x 7 px for a 1x1 convolution and 4 x 4 for a 3x3 one (as a
// product of the 9 shifted views, "im2col"), beyond which the convolution wins; in FP32 (OpenBLAS) only 2 x 2 for
// both, as at 4 x 4 the matmul gained too little alone and made ResNet-50's FP32 step slower.
int64_t max_pointwise_pixels(torch::ScalarType dtype) { return dtype == torch::kFloat ? 2 * 2 : 7 * 7; }
int64_t max_patch_pixels(torch::ScalarType dtype) { return dtype == torch::kFloat ? 2 * 2 : 4 * 4; }

// The 3x3 patches of a (B, H, W, C) image padded by 1, as (B*H_out*W_out, 9*C) rows in (kernel row, kernel
// column, channel) order. Its own backward adds the 9 slices of the rows' gradient into one zeroed padded image;
// autograd through pad, slices and stack zeroed a padded image per slice and summed the 9 (ResNet-50 BF16 at 64 px:
// 166 slice backwards and 272 zero-fills per step).
struct PatchRowsFunction : public torch::autograd::Function<PatchRowsFunction> {
  static torch::Tensor forward(torch::autograd::AutogradContext* ctx, const torch::Tensor& image, int64_t stride,
                               int64_t height, int64_t width) {
    ctx->saved_data["stride"] = stride;
    ctx->saved_data["height"] = height;
    ctx->saved_data["width"] = width;
    ctx->saved_data["image_size"] = image.sizes();
    const torch::Tensor padded = torch::constant_pad_nd(image, {0, 0, 1, 1, 1, 1});  // (B, H+2, W+2, C)
    std::vector<torch::Tensor> shifted;
    for (int64_t i = 0; i < 3; ++i)
      for (int64_t j = 0; j < 3; ++j) shifted.push_back(window(padded, i, j, stride, height, width));
    return torch::stack(shifted, 3).reshape({-1, 9 * image.size(3)});  // (B, H_out, W_out, 9, C) as rows
  }

  static torch::autograd::variable_list backward(torch::autograd::AutogradContext* ctx,
                                                 torch::autograd::variable_list grad_outputs) {
    const int64_t stride = ctx->saved_data["stride"].toInt(), height = ctx->saved_data["height"].toInt();
    const int64_t width = ctx->saved_data["width"].toInt();
    const std::vector<int64_t> size = ctx->saved_data["image_size"].toIntVector();
    const torch::Tensor grad = grad_outputs[0].reshape({size[0], height, width, 9, size[3]});
    torch::Tensor grad_padded = torch::zeros({size[0], size[1] + 2, size[2] + 2, size[3]}, grad.options());
    for (int64_t i = 0; i < 3; ++i)
      for (int64_t j = 0; j < 3; ++j) window(grad_padded, i, j, stride, height, width).add_(grad.select(3, 3 * i + j));
    const torch::Tensor grad_image = grad_padded.slice(1, 1, size[1] + 1).slice(2, 1, size[2] + 1).contiguous();
    return {grad_image, torch::Tensor(), torch::Tensor(), torch::Tensor()};
  }

  // The pixels that kernel position (i, j) sees for each of the H_out x W_out outputs: (B, H_out, W_out, C).
  static torch::Tensor window(const torch::Tensor& padded, int64_t i, int64_t j, int64_t stride, int64_t height,
                              int64_t width) {
    return padded.slice(1, i, i + (height - 1) * stride + 1, stride).slice(2, j, j + (width - 1) * stride + 1, stride);
  }
};

// A convolution as (B*H_out*W_out, k*k*C_in) x (k*k*C_in, C_out) for small channels-last images, where that is
// faster (above); conv() pads k / 2. A channels-last (B, C, H, W) tensor already is the (B*H*W, C) matrix, so a
// 1x1 stride-1 convolution needs no copy (a strided one copies every s-th pixel); a 3x3 one stacks its 9 shifted,
// strided views of the padded image.
// CPU only: cuDNN has its own algorithms for these shapes.
torch::Tensor conv_matmul_forward(torch::nn::Conv2d& conv, const torch::Tensor& x) {
  const auto& options = conv->options;
  const int64_t kernel = (*options.kernel_size())[0], stride = (*options.stride())[0];
  const bool plain = (*options.kernel_size())[1] == kernel && (*options.stride())[1] == stride &&
                     (*options.dilation())[0] == 1 && (*options.dilation())[1] == 1 && options.groups() == 1 &&
                     !conv->bias.defined() && (kernel == 1 || kernel == 3);
  if (!plain || !x.device().is_cpu() || x.dim() != 4 || !x.is_contiguous(torch::MemoryFormat::ChannelsLast))
    return conv->forward(x);
  const torch::ScalarType dtype =
      x.scalar_type() == torch::kFloat ? precision::projection_dtype(torch::kCPU) : x.scalar_type();
  const int64_t batch = x.size(0), in = x.size(1), out = options.out_channels();
  const int64_t height = (x.size(2) + 2 * (kernel / 2) - kernel) / stride + 1;
  const int64_t width = (x.size(3) + 2 * (kernel / 2) - kernel) / stride + 1;
  const torch::Tensor image = x.permute({0, 2, 3, 1});  // (B, H, W, C_in), a view
  torch::Tensor rows;                                   // (B*H_out*W_out, k*k*C_in)
  if (kernel == 1 && height * width <= max_pointwise_pixels(dtype)) {
    rows =
        (stride == 1 ? image : image.slice(1, 0, x.size(2), stride).slice(2, 0, x.size(3), stride)).reshape({-1, in});
  } else if (kernel == 3 && height * width <= max_patch_pixels(dtype)) {
    rows = PatchRowsFunction::apply(image, stride, height, width);
  } else {
    return conv->forward(x);
  }
  // The weight as (C_out, k, k, C_in) rows, the patches' order.
  const torch::Tensor weight = conv->weight.permute({0, 2, 3, 1}).reshape({out, kernel * kernel * in});
  const torch::Tensor y = torch::matmul(rows, weight.t());           // (B*H_out*W_out, C_out)
  return y.view({batch, height, width, out}).permute({0, 3, 1, 2});  // (B, C_out, H_out, W_out), channels-last
}

// A convolution through its runner: an FP32 island when the policy keeps it there, seen by numerics' probe.
torch::Tensor conv_forward(torch::nn::Conv2d& conv, const precision::ModuleRunner& runner, const torch::Tensor& x) {
  return runner(x, [&](const torch::Tensor& h) { return conv_matmul_forward(conv, h); });
}

}  // namespace

ResidualBlockImpl::ResidualBlockImpl(bool bottleneck, int64_t in_planes, int64_t planes, int64_t stride,
                                     const precision::ModulePolicy& policy, const std::string& prefix,
                                     NormGroup norm_group)
    : norm_group_(std::move(norm_group)) {
  // v1.5: the stride sits on the 3x3 conv (conv2 of a Bottleneck, conv1 of a BasicBlock).
  const int64_t out_planes = bottleneck ? planes * kExpansion : planes;
  if (bottleneck) {
    convs_ = {conv(in_planes, planes, /*kernel=*/1, /*stride=*/1), conv(planes, planes, 3, stride),
              conv(planes, out_planes, 1, 1)};
  } else {
    convs_ = {conv(in_planes, planes, 3, stride), conv(planes, planes, 3, 1)};
  }
  for (size_t i = 0; i < convs_.size(); ++i) {
    const std::string index = std::to_string(i + 1);
    register_module("conv" + index, convs_[i]);
    conv_runners_.push_back(policy.runner(prefix + ".conv" + index));
    norms_.push_back(register_module("bn" + index, torch::nn::BatchNorm2d(convs_[i]->options.out_channels())));
    norm_runners_.push_back(policy.runner(prefix + ".bn" + index));
  }
  if (stride != 1 || in_planes != out_planes) {
    downsample_conv_ = conv(in_planes, out_planes, 1, stride);
    downsample_norm_ = torch::nn::BatchNorm2d(out_planes);
    // A Sequential only for torchvision's names (downsample.0, downsample.1); forward uses the handles.
    register_module("downsample", torch::nn::Sequential(downsample_conv_, downsample_norm_));
    downsample_conv_runner_ = policy.runner(prefix + ".downsample.0");
    downsample_runner_ = policy.runner(prefix + ".downsample.1");
  }
}

torch::Tensor ResidualBlockImpl::forward(const torch::Tensor& x) {
  const size_t last = convs_.size() - 1;
  torch::Tensor out = x;  // (B, C_in, H, W)
  for (size_t i = 0; i < last; ++i)
    out = norm_add_relu(*norms_[i], norm_runners_[i], conv_forward(convs_[i], conv_runners_[i], out), {},
                        /*relu=*/true, *norm_group_);
  out = conv_forward(convs_[last], conv_runners_[last], out);
  torch::Tensor identity = x;
  if (downsample_conv_)
    identity = norm_add_relu(*downsample_norm_, downsample_runner_,
                             conv_forward(downsample_conv_, downsample_conv_runner_, x), {},
                             /*relu=*/false, *norm_group_);
  return norm_add_relu(*norms_[last], norm_runners_[last], out, identity, /*relu=*/true,
                       *norm_group_);  // (B, C_out, H / stride, W / stride)
}

int64_t ResidualBlockImpl::macs(int64_t& height, int64_t& width) const {
  int64_t h_in = height, w_in = width, total = 0;
  for (const auto& c : convs_) total += conv_macs(c, height, width);
  if (downsample_conv_) total += conv_macs(downsample_conv_, h_in, w_in);
  return total;
}

ResNetImpl::ResNetImpl(const ResNetConfig& config, const precision::ModulePolicy& policy, Recompute recompute)
    : config_(config), policy_(policy), recompute_(recompute) {
  const Layout layout = layout_for(config_.depth);
  conv1_ = register_module(
      "conv1", config_.small_input ? conv(config_.in_channels, 64, 3, 1) : conv(config_.in_channels, 64, 7, 2));
  bn1_ = register_module("bn1", torch::nn::BatchNorm2d(64));
  conv1_runner_ = policy.runner("conv1");
  bn1_runner_ = policy.runner("bn1");
  int64_t in_planes = 64;
  for (int stage = 0; stage < 4; ++stage) {
    const std::string name = "layer" + std::to_string(stage + 1);
    const int64_t planes = 64 << stage;
    torch::nn::ModuleList blocks;
    for (int64_t b = 0; b < layout.blocks[stage]; ++b) {
      const int64_t stride = (stage > 0 && b == 0) ? 2 : 1;
      blocks->push_back(ResidualBlock(layout.bottleneck, in_planes, planes, stride, policy,
                                      name + "." + std::to_string(b), norm_group_));
      in_planes = layout.bottleneck ? planes * kExpansion : planes;
    }
    layers_.push_back(register_module(name, blocks));
  }
  fc_ = register_module("fc", torch::nn::Linear(in_planes, config_.num_classes));
  fc_runner_ = policy.runner("fc");

  torch::NoGradGuard no_grad;
  for (auto& module : modules(/*include_self=*/false)) {
    if (auto* c = module->as<torch::nn::Conv2d>())
      torch::nn::init::kaiming_normal_(c->weight, 0.0, torch::kFanOut, torch::kReLU);
  }
  if (config_.zero_init_residual)
    for (auto& layer : layers_)
      for (auto& block : *layer) block->as<ResidualBlockImpl>()->last_norm()->weight.zero_();
  // Convolution weights in NHWC; the optimizer's state and the master copies follow their layout.
  if (config_.channels_last)
    for (auto& p : parameters())
      if (p.dim() == 4) p.set_data(p.data().contiguous(torch::MemoryFormat::ChannelsLast));
}

torch::Tensor ResNetImpl::forward(const torch::Tensor& inputs) {
  const torch::Tensor image = config_.channels_last ? inputs.contiguous(torch::MemoryFormat::ChannelsLast) : inputs;
  torch::Tensor x = conv1_runner_(image, [&](const torch::Tensor& h) {
    return conv1_->forward(h);
  });  // (B, 64, H/2, W/2), or (B, 64, H, W) with the small stem
  x = norm_add_relu(*bn1_, bn1_runner_, x, {}, /*relu=*/true, *norm_group_);
  if (!config_.small_input) x = torch::max_pool2d(x, /*kernel_size=*/3, /*stride=*/2, /*padding=*/1);  // H/4
  for (auto& layer : layers_)
    for (auto& module : *layer)  // (B, C, H/32, W/32) at the end
      x = through_block(*module->as<ResidualBlockImpl>(), x, recompute_, policy_);
  x = torch::adaptive_avg_pool2d(x, {1, 1}).flatten(1);                           // (B, C)
  return fc_runner_(x, [&](const torch::Tensor& h) { return fc_->forward(h); });  // (B, K)
}

int64_t ResNetImpl::forward_macs(const data::SampleShape& sample) const {
  int64_t height = sample.height, width = sample.width;
  int64_t total = conv_macs(conv1_, height, width);
  if (!config_.small_input) height = (height + 1) / 2, width = (width + 1) / 2;  // 3x3 stride-2 max-pool
  for (const auto& layer : layers_)
    for (const auto& block : *layer) total += block->as<ResidualBlockImpl>()->macs(height, width);
  return total + fc_->options.in_features() * fc_->options.out_features();
}

namespace {

const keys::OptionTable<ResNetConfig>& resnet_options() {
  static const keys::OptionTable<ResNetConfig> table = [] {
    keys::OptionTable<ResNetConfig> options;
    options.add("model.small_input", &ResNetConfig::small_input,
                "ResNet: 3x3 stride-1 stem without max-pool, for 28-32 px images.");
    options.add("model.zero_init_residual", &ResNetConfig::zero_init_residual,
                "ResNet: zero the last norm of each block (blocks start as identity).");
    options.add("model.channels_last", &ResNetConfig::channels_last,
                "ResNet: NHWC (channels-last) weights and activations, the layout oneDNN's BF16 convolutions and "
                "CUDA Tensor Cores prefer.");
    return options;
  }();
  return table;
}

Model build_resnet(const ModelConfig& model, const MemoryConfig& memory, const data::SampleShape& sample,
                   const precision::ModulePolicy& policy) {
  ResNetConfig config = resnet_options().read(model.options);
  config.depth = std::stoi(model.name.substr(6));  // "resnet50"
  config.in_channels = sample.channels;
  config.num_classes = sample.num_classes;
  return std::make_shared<ResNetImpl>(config, policy, memory.activation_checkpointing);
}

}  // namespace

const ModelFamily& resnet_family() {
  static const ModelFamily family{"resnet",
                                  "ResNet",
                                  data::Modality::kImages,
                                  {"resnet18", "resnet34", "resnet50", "resnet101", "resnet152"},
                                  resnet_options().keys(),
                                  /*takes_dropout=*/false,
                                  /*fp32_modules=*/{"fc"},
                                  {Recompute::kNone, Recompute::kFull},
                                  build_resnet,
                                  nullptr,
                                  /*hf_base_prefix=*/"",
                                  /*hf_config=*/nullptr};
  return family;
}

}  // namespace mpt::models
