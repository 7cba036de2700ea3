// Data-parallel gradient averaging: after backward, each rank's gradients are packed into flat FP32 buckets of
// about `bucket_mb`, every bucket's all-reduce is started at once (Gloo works on them in its own threads while
// the next one is being packed), and the sums come back divided by the world size. It runs on the FP32
// gradients the optimizer sees, so the average is exact in FP32 even when the model computes in BF16/FP16.
#pragma once

#include <torch/torch.h>

#include <vector>

#include "distributed/process_group.h"

namespace mpt::distributed {

class GradientAverager {
 public:
  // `parameters` in model order; buckets are filled back to front, the order backward produces gradients.
  GradientAverager(Group& group, std::vector<torch::Tensor> parameters, double bucket_mb);

  // Replaces every gradient with its mean over the ranks. A parameter no rank gave a gradient keeps none (as
  // in single-process training); one that only some ranks reached gets the mean with zeros for the others.
  void average();

  size_t buckets() const { return buckets_.size(); }

 private:
  struct Bucket {
    std::vector<size_t> members;  // indices into parameters_
    torch::Tensor flat;           // FP32: the members' gradients back to back, then one "has a gradient" flag each
  };

  Group& group_;
  std::vector<torch::Tensor> parameters_;
  std::vector<Bucket> buckets_;
};

}  // namespace mpt::distributed
