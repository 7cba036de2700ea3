// How an optimizer step reaches the FP32 weights once the gradients are in, chosen once when the step is built:
//   one pass      one CPU process with one of mpt's fused optimizers: one read checks the gradients, and the
//                 optimizer unscales and clips them by one factor as it reads them (under master_weights reading
//                 the model's BF16 gradients and writing its BF16 weights; ops/fused_optimizers.h)
//   in place      one process otherwise (a GPU): FP32 copies of master gradients, unscale and check, clip, the
//                 optimizer's step, the masters copied back
//   across ranks  data parallelism: as in place, with the gradients averaged over the ranks first and the overflow
//                 verdict agreed by all of them
//   sharded       across ranks with ZeRO-1: each rank steps its 1/N of the elements and broadcasts them
//                 (train/optimizer_shards.h)
#pragma once

#include <torch/torch.h>

#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "distributed/gradient_averager.h"
#include "distributed/process_group.h"
#include "io/checkpoint.h"
#include "precision/finish_backward.h"
#include "precision/recipe.h"

namespace mpt::train {

using NamedTensors = torch::OrderedDict<std::string, torch::Tensor>;

class UpdatePath {
 public:
  virtual ~UpdatePath() = default;
  virtual const char* name() const = 0;  // "one pass", "in place", "across ranks"
  // After backward, before the gradients are inspected: master-gradient copies and the cross-rank average.
  virtual void gather() {}
  // The tensors whose grad() holds this step's gradients, named like the weights (injection, a skip's diagnosis).
  virtual NamedTensors gradient_holders() const = 0;
  // Unscale, check, clip and the loss scale's update (precision/finish_backward.h).
  virtual precision::FinishedBackward finish(bool stop_requested) = 0;
  // The optimizer step of a step that was not skipped.
  virtual void apply(const precision::FinishedBackward& finished) = 0;
  // ZeRO-1, at a checkpoint (collective): each rank writes the pieces of masters and optimizer state it owns to its
  // shard of the checkpoint at `main_path` (`names`: the weights' names, in the recipe's order); returns every rank's
  // shard and the layouts of the masters only pieces hold. Nothing on the paths that hold the whole state, which the
  // main file holds then.
  virtual std::optional<io::ShardedMasters> write_pieces(const std::string& /*main_path*/,
                                                         const std::vector<std::string>& /*names*/) {
    return std::nullopt;
  }
  // After a checkpoint was loaded into the whole masters and the run's optimizer.
  virtual void after_load() {}
};

// The path for `optimizer` over `recipe`'s weights: across ranks when `group` is distributed (bucketed averaging of
// `config.bucket_mb`; sharded under `config.shard_optimizer`), one pass when the optimizer can step the masters in
// one pass, else in place.
std::unique_ptr<UpdatePath> choose_update_path(torch::optim::Optimizer& optimizer, precision::Recipe& recipe,
                                               torch::nn::Module& model, double max_norm, distributed::Group& group,
                                               const distributed::DistributedConfig& config);

}  // namespace mpt::train
