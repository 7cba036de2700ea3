// Batches from a dataset: a seeded, per-epoch shuffle that depends only on (seed, epoch), and per-batch
// randomness (augmentation, masking) that depends only on (seed, epoch, batch), so a run resumed from a
// checkpoint's data position sees exactly the batches an uninterrupted run would. Datasets of image files are
// decoded on worker threads, each preparing one of the next batches while the model trains on this one.
#pragma once

#include <torch/torch.h>

#include <cstdint>
#include <deque>
#include <future>
#include <map>
#include <vector>

#include "core/data/dataset.h"

namespace mpt::data {

struct DataPosition {
  int64_t epoch = 0;  // 0-based
  int64_t batch = 0;  // next batch within the epoch
  int64_t batch_samples = 0;  // samples one batch step covers on all ranks together (0: not recorded)
};

// Data parallelism: rank `index` of `count` takes the index-th slice of every global batch of count x B
// samples, so the ranks of a step together see exactly the batch one process with count x B would.
struct Shard {
  int64_t index = 0;
  int64_t count = 1;
};

struct Batch {
  torch::Tensor inputs;   // images: FP32 (B, C, H, W), normalised; text: int64 token ids (B, S); on the host
  torch::Tensor targets;  // int64 (B) labels, or (B, S) masked-LM targets (-100 where not predicted)
};

class BatchLoader {
 public:
  // drop_last keeps every training batch the same shape; evaluation keeps the ragged tail (where a rank's
  // slice of the last batch may be empty). batch_size is per rank.
  BatchLoader(const Dataset& dataset, int64_t batch_size, bool shuffle, uint64_t seed, bool drop_last,
              Shard shard = {});
  ~BatchLoader();
  BatchLoader(const BatchLoader&) = delete;
  BatchLoader& operator=(const BatchLoader&) = delete;

  int64_t batches_per_epoch() const { return batches_per_epoch_; }
  DataPosition position() const { return {position_.epoch, position_.batch, batch_size_ * shard_.count}; }
  // Continues from `position`. One recorded with another global batch (a different world size) is re-sharded
  // to the batch holding its next sample, repeating at most one batch's samples; returns true when it was.
  bool seek(const DataPosition& position);

  // The batch at the current position; advances, rolling over into the next epoch.
  Batch next();

 private:
  const torch::Tensor& order_for(int64_t epoch);  // the sample order of an epoch (the last two are kept)
  torch::Tensor indices_at(const DataPosition& position);
  uint64_t batch_seed(const DataPosition& position) const;
  DataPosition after(const DataPosition& position) const;
  Batch make_batch(const torch::Tensor& indices, uint64_t seed) const;  // thread-safe: reads the dataset only
  Batch image_batch(const torch::Tensor& indices, uint64_t seed) const;
  Batch file_batch(const torch::Tensor& indices, uint64_t seed) const;
  Batch token_batch(const torch::Tensor& indices, uint64_t seed) const;

  const Dataset& dataset_;
  int64_t batch_size_;
  Shard shard_;
  bool shuffle_;
  uint64_t seed_;
  int64_t batches_per_epoch_;
  DataPosition position_;
  std::map<int64_t, torch::Tensor> orders_;  // epoch -> int64 permutation
  struct Pending {
    DataPosition position;
    std::future<Batch> batch;
  };
  std::deque<Pending> pending_;  // file datasets: batches being decoded, in order from position_
};

}  // namespace mpt::data
