// ResNet family (18/34/50/101/152), torchvision's v1.5 architecture (stride on the 3x3 conv) with its
// state-dict names, so weights move between mpt and torchvision users unchanged. An optional small-input stem
// (3x3 stride-1 conv, no max-pool) suits 28-32 px images. Norm layers run through the precision policy.
#pragma once

#include <string>
#include <vector>

#include "distributed/process_group.h"
#include "models/family.h"
#include "models/model.h"
#include "models/recompute.h"
#include "precision/policy.h"

namespace mpt::models {

struct ResNetConfig {
  int depth = 50;  // 18, 34, 50, 101 or 152
  int64_t in_channels = 3;
  int64_t num_classes = 1000;
  bool small_input = false;         // CIFAR-style stem for 28-32 px inputs
  bool zero_init_residual = false;  // start each block as identity (Goyal et al.)
  bool channels_last = false;       // NHWC weights and activations (oneDNN's and Tensor Cores' layout)
};

// A residual block: BasicBlock (two 3x3) for depth 18/34, Bottleneck (1x1, 3x3, 1x1) for 50 and up.
// Where a ResNet's norm layers find the group that synchronises them (shared by all its blocks; null = local).
using NormGroup = std::shared_ptr<distributed::Group*>;

class ResidualBlockImpl : public torch::nn::Module {
 public:
  ResidualBlockImpl(bool bottleneck, int64_t in_planes, int64_t planes, int64_t stride,
                    const precision::ModulePolicy& policy, const std::string& prefix, NormGroup norm_group);
  torch::Tensor forward(const torch::Tensor& x);
  torch::nn::BatchNorm2d last_norm() const { return norms_.back(); }
  // MACs for an input of (C_in, height, width); updates height and width to the block's output size.
  int64_t macs(int64_t& height, int64_t& width) const;

 private:
  std::vector<torch::nn::Conv2d> convs_;
  std::vector<torch::nn::BatchNorm2d> norms_;
  std::vector<precision::ModuleRunner> conv_runners_, norm_runners_;
  torch::nn::Conv2d downsample_conv_{nullptr};
  torch::nn::BatchNorm2d downsample_norm_{nullptr};
  precision::ModuleRunner downsample_conv_runner_, downsample_runner_;
  NormGroup norm_group_;
};
TORCH_MODULE(ResidualBlock);

class ResNetImpl : public ModelImpl {
 public:
  // `recompute` kFull: each residual block keeps only its input and runs again in backward (models/recompute.h).
  ResNetImpl(const ResNetConfig& config, const precision::ModulePolicy& policy, Recompute recompute = Recompute::kNone);
  torch::Tensor forward(const torch::Tensor& inputs) override;
  int64_t forward_macs(const data::SampleShape& sample) const override;
  void synchronise_batch_norm(distributed::Group* group) override { *norm_group_ = group; }

 private:
  ResNetConfig config_;
  NormGroup norm_group_ = std::make_shared<distributed::Group*>(nullptr);
  torch::nn::Conv2d conv1_{nullptr};
  torch::nn::BatchNorm2d bn1_{nullptr};
  std::vector<torch::nn::ModuleList> layers_;
  torch::nn::Linear fc_{nullptr};
  precision::ModuleRunner conv1_runner_, bn1_runner_, fc_runner_;
  precision::ModulePolicy policy_;
  Recompute recompute_;
};

// The family: model.name resnet18 .. resnet152, with model.small_input, model.zero_init_residual and
// model.channels_last; full activation checkpointing recomputes each residual block.
const ModelFamily& resnet_family();

}  // namespace mpt::models
