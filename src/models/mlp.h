// The seed's MLP: flatten -> [Linear -> activation (-> dropout)] per hidden width -> Linear head.
// Module names are "hidden.N" and "head"; the precision policy decides by name which stay FP32.
#pragma once

#include <string>
#include <vector>

#include "models/family.h"
#include "models/model.h"
#include "precision/policy.h"

namespace mpt::models {

struct MlpConfig {
  int64_t in_features = 784;
  std::vector<int64_t> hidden_sizes{512};
  int64_t num_classes = 10;
  std::string activation = "relu";
  double dropout = 0.0;
};

class MlpImpl : public ModelImpl {
 public:
  MlpImpl(const MlpConfig& config, const precision::ModulePolicy& policy);
  torch::Tensor forward(const torch::Tensor& inputs) override;
  int64_t forward_macs(const data::SampleShape& sample) const override;

 private:
  torch::Tensor activate(const torch::Tensor& x) const;

  MlpConfig config_;
  torch::nn::ModuleList hidden_;
  torch::nn::Linear head_{nullptr};
  std::vector<precision::ModuleRunner> hidden_runners_;
  precision::ModuleRunner head_runner_;
};

// The family: model.name mlp, with model.hidden_sizes and model.activation.
const ModelFamily& mlp_family();

}  // namespace mpt::models
