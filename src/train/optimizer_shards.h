// ZeRO-1 (distributed.shard_optimizer), as DeepSpeed partitions: the parameters' elements, in model order and each
// parameter in memory order, are one flat run cut into N equal ranges, and rank r keeps the FP32 masters and the
// optimizer state of range r alone (its pieces: the parts of parameters that fall in it). The gradients are still
// averaged in full on every rank, so the overflow verdict, the global-norm clipping and the loss scale are those of
// unsharded data parallelism; then each rank steps its pieces with an optimizer of the same kind over them, writes
// them into the model's weights in the model's dtype, and the owners broadcast them.
// At a checkpoint each rank writes its pieces to a shard of its own (io/checkpoint.h), nothing gathered; a loaded
// checkpoint (sharded or whole, from any number of ranks) fills the whole masters and the run's optimizer, which are
// cut into pieces at the next step, so a run resumes on any number of ranks.
#pragma once

#include <torch/torch.h>

#include <memory>
#include <vector>

#include "distributed/process_group.h"
#include "io/checkpoint.h"
#include "precision/recipe.h"

namespace mpt::train {

// A run of one parameter's elements, in its memory order, that one rank owns.
struct Piece {
  size_t pair = 0;     // index into precision::Recipe::pairs
  int64_t start = 0;   // first element
  int64_t length = 0;  // elements
  int owner = 0;
};

// Where a parameter may be cut: a multiple of this many elements from its start.
constexpr int64_t kPieceAlignment = 64;

// The pieces of parameters of `numels` elements (model order) over `world_size` equal ranges (to within
// kPieceAlignment elements), in order.
std::vector<Piece> partition(const std::vector<int64_t>& numels, int world_size);

// The training state one rank holds, in bytes, as `mpt inspect --ranks N` prints it.
struct RankState {
  int64_t weights = 0;          // the model's parameters, in their dtypes
  int64_t gradients = 0;        // the same dtypes, every parameter
  int64_t masters = 0;          // FP32 masters of the low-precision parameters (the owned pieces when sharded)
  int64_t optimizer_state = 0;  // 4 bytes per element for SGD momentum, 8 for Adam's two moments
};

// Each rank's state for `pairs` (precision::Recipe::pairs) under `optimizer` ("sgd" with `momentum`, "adam",
// "adamw") on `ranks` ranks, masters and optimizer state cut by partition() when `sharded`.
std::vector<RankState> state_per_rank(const std::vector<precision::MasterPair>& pairs, const std::string& optimizer,
                                      double momentum, int ranks, bool sharded);

class OptimizerShards {
 public:
  OptimizerShards(torch::optim::Optimizer& optimizer, precision::Recipe& recipe, distributed::Group& group);
  ~OptimizerShards();

  // Before the gradients are copied to the masters: the first time (and after a load), this rank's pieces are cut
  // from the whole masters and optimizer state, which are then let go.
  void take_pieces();
  // The optimizer step of this rank's pieces, their values written into the model, and every owner's broadcast.
  void step();
  // Collective: this rank's pieces (masters and optimizer state) written to its shard of the checkpoint at
  // `main_path`; every rank's shard, and the layouts the non-FP32 masters were cut from, for rank 0's main file.
  io::ShardedMasters write_pieces(const std::string& main_path, const std::vector<std::string>& names);
  // After a load into the whole masters and the run's optimizer: the next take_pieces cuts them anew.
  void loaded() { whole_ = true; }

 private:
  void release_whole_state();
  void publish();

  torch::optim::Optimizer& optimizer_;  // the run's own, over the whole masters: only checkpoints use its state
  precision::Recipe& recipe_;
  distributed::Group& group_;
  std::vector<Piece> pieces_;
  std::vector<size_t> mine_;                        // indices into pieces_
  std::vector<torch::Tensor> shards_;               // FP32, one per piece of mine_
  std::unique_ptr<torch::optim::Optimizer> shard_;  // the same kind of optimizer over shards_
  std::vector<std::vector<int64_t>> layouts_;       // per pair: the strides its master was cut from
  bool whole_ = true;                               // the masters and the run's optimizer hold the whole state
};

}  // namespace mpt::train
