// ZeRO-1 (distributed.shard_optimizer): each rank owns whole parameters, about 1/N of the FP32 master bytes, and
// keeps their masters and optimizer state alone. The gradients are still averaged in full on every rank, so the
// overflow verdict, the global-norm clipping and the loss scale are those of unsharded data parallelism; then each
// rank steps what it owns and the owners broadcast the updated weights in the model's dtype. The other ranks'
// masters shrink to a placeholder of their shape after the first step, and their optimizer state is never created.
// A checkpoint gathers the whole state on every rank for the save and drops it again, so its file is the unsharded
// one and a run resumes on any number of ranks.
#pragma once

#include <torch/torch.h>

#include <vector>

#include "distributed/process_group.h"
#include "precision/recipe.h"

namespace mpt::train {

// Which rank owns each parameter of `costs` (in model order): the costliest first to the least loaded rank, ties to
// the lower rank, so every rank computes the same split.
std::vector<int> assign_owners(const std::vector<int64_t>& costs, int world_size);

// The training state one rank holds, in bytes, as `mpt inspect --ranks N` prints it.
struct RankState {
  int64_t weights = 0;          // the model's parameters, in their dtypes
  int64_t gradients = 0;        // the same dtypes, every parameter
  int64_t masters = 0;          // FP32 masters of the low-precision parameters (the owned ones when sharded)
  int64_t optimizer_state = 0;  // 4 bytes per element for SGD momentum, 8 for Adam's two moments
};

// Each rank's state for `pairs` (precision::Recipe::pairs) under `optimizer` ("sgd" with `momentum`, "adam",
// "adamw") on `ranks` ranks, masters and optimizer state split by assign_owners when `sharded`.
std::vector<RankState> state_per_rank(const std::vector<precision::MasterPair>& pairs, const std::string& optimizer,
                                      double momentum, int ranks, bool sharded);

class OptimizerShards {
 public:
  OptimizerShards(torch::optim::Optimizer& optimizer, precision::Recipe& recipe, distributed::Group& group);

  bool owns(size_t pair) const { return owners_[pair] == group_.rank(); }
  // Before the optimizer step: the gradients of parameters another rank owns are dropped, so the step skips them.
  void drop_foreign_gradients();
  // After it: the owners' new weights copied into the model and broadcast to every rank, one flat tensor per owner
  // and dtype; then the foreign masters shrink (a no-op after the first step).
  void publish();
  // Collective, before a checkpoint's save: every master and every optimizer state on every rank.
  void gather_whole_state();
  // After the save or a load: only the owned optimizer state remains, and the owned masters once a step has run
  // (until then the run's start broadcasts every master from rank 0).
  void release_foreign_state();

 private:
  void broadcast_weights(bool masters);
  void gather_optimizer_state(size_t pair);

  torch::optim::Optimizer& optimizer_;
  precision::Recipe& recipe_;
  distributed::Group& group_;
  std::vector<int> owners_;  // per recipe pair
  bool stepped_ = false;
};

}  // namespace mpt::train
