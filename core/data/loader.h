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
};

struct Batch {
  torch::Tensor inputs;   // images: FP32 (B, C, H, W), normalised; text: int64 token ids (B, S); on the host
  torch::Tensor targets;  // int64 (B) labels, or (B, S) masked-LM targets (-100 where not predicted)
};

class BatchLoader {
 public:
  // drop_last keeps every training batch the same shape; evaluation keeps the ragged tail.
  BatchLoader(const Dataset& dataset, int64_t batch_size, bool shuffle, uint64_t seed, bool drop_last);
  ~BatchLoader();
  BatchLoader(const BatchLoader&) = delete;
  BatchLoader& operator=(const BatchLoader&) = delete;

  int64_t batches_per_epoch() const { return batches_per_epoch_; }
  const DataPosition& position() const { return position_; }
  void seek(const DataPosition& position);

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
