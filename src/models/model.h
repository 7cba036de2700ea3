// What every mpt model is to the trainer: a torch Module mapping a batch of inputs to logits, and the
// logits/targets pair the loss takes.
#pragma once

#include <torch/torch.h>

#include <set>
#include <string>
#include <utility>
#include <vector>

#include "data/dataset.h"
#include "precision/policy.h"

namespace mpt::distributed {
class Group;
}

namespace mpt::models {

// What the loss compares: logits (N, K) and int64 targets (N). N is the batch for classifiers and the masked
// positions for a masked-LM head, which computes logits only there (as fast BERT pre-training does).
struct Prediction {
  torch::Tensor logits;
  torch::Tensor targets;
};

class ModelImpl : public torch::nn::Module {
 public:
  virtual torch::Tensor forward(const torch::Tensor& inputs) = 0;  // (B, ...) -> logits (B, [S,] K)

  // The training and evaluation entry: classifiers return forward(inputs) with the targets unchanged.
  // `target_positions`, when defined, are the flat indices of the targets that count (data::Batch's, found on the
  // host); a masked-LM head finds them itself otherwise.
  virtual Prediction predict(const torch::Tensor& inputs, const torch::Tensor& targets,
                             const torch::Tensor& /*target_positions*/) {
    return {forward(inputs), targets};
  }
  Prediction predict(const torch::Tensor& inputs, const torch::Tensor& targets) { return predict(inputs, targets, {}); }

  // Multiply-accumulates of one forward pass for one sample; training costs about 3 x 2 x this many FLOPs
  // (forward, and backward for inputs and weights).
  virtual int64_t forward_macs(const data::SampleShape& sample) const = 0;

  // Data parallelism: batch-norm layers normalise with the global batch's statistics over `group` (null:
  // local statistics, the default). Models without batch norm ignore it.
  virtual void synchronise_batch_norm(distributed::Group* /*group*/) {}

  // Parameters of other modules that an FP32 island reads (tied weights: BERT's MLM decoder reads the word
  // embeddings). precision.strategy = master_weights keeps them FP32, so the island neither widens a
  // low-precision copy each step nor narrows its gradient back.
  virtual std::set<std::string> tied_to_fp32_islands() const { return {}; }

  // Dimensions of GEMMs the model makes without a Linear or Conv2d module (BERT's tied MLM decoder multiplies by
  // the word embeddings), as (what, size), for those that `policy` does not keep in FP32: the Tensor Core shape
  // check (src/models/tensor_core_shapes.h) sees the modules by itself.
  virtual std::vector<std::pair<std::string, int64_t>> functional_gemm_dims(
      const precision::ModulePolicy& /*policy*/) const {
    return {};
  }
};

using Model = std::shared_ptr<ModelImpl>;

}  // namespace mpt::models
