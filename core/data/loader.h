// Batches from an in-memory dataset: a seeded, per-epoch shuffle that depends only on (seed, epoch), so a
// run resumed from a checkpoint's data position sees exactly the batches an uninterrupted run would.
#pragma once

#include <torch/torch.h>

#include <cstdint>
#include <vector>

#include "core/data/dataset.h"

namespace mpt::data {

struct DataPosition {
  int64_t epoch = 0;  // 0-based
  int64_t batch = 0;  // next batch within the epoch
};

struct Batch {
  torch::Tensor inputs;   // images: FP32 (B, C, H, W), normalised; text: int64 token ids (B, S); on the host
  torch::Tensor targets;  // int64 (B) labels, or (B, S) masked-LM targets (-100 where not predicted)
};

class BatchLoader {
 public:
  // drop_last keeps every training batch the same shape; evaluation keeps the ragged tail.
  BatchLoader(const Dataset& dataset, int64_t batch_size, bool shuffle, uint64_t seed, bool drop_last);

  int64_t batches_per_epoch() const { return batches_per_epoch_; }
  const DataPosition& position() const { return position_; }
  void seek(const DataPosition& position);

  // The batch at the current position; advances, rolling over into the next epoch.
  Batch next();

 private:
  void shuffle_for(int64_t epoch);
  Batch image_batch(const torch::Tensor& indices) const;
  Batch token_batch(const torch::Tensor& indices) const;

  const Dataset& dataset_;
  int64_t batch_size_;
  bool shuffle_;
  uint64_t seed_;
  int64_t batches_per_epoch_;
  DataPosition position_;
  int64_t order_epoch_ = -1;
  torch::Tensor order_;  // int64 permutation for order_epoch_
};

}  // namespace mpt::data
