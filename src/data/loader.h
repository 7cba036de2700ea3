// Batches from a dataset: a seeded, per-epoch shuffle that depends only on (seed, epoch), and per-batch
// randomness (augmentation, masking) that depends only on (seed, epoch, batch), so a run resumed from a
// checkpoint's data position sees exactly the batches an uninterrupted run would. Datasets of image files are
// decoded on worker threads, each preparing one of the next batches while the model trains on this one. Batches
// arrive on the device the loader delivers to.
#pragma once

#include <torch/torch.h>

#include <cstdint>
#include <deque>
#include <future>
#include <map>
#include <optional>
#include <vector>

#include "data/dataset.h"
#include "data/image_batch.h"

namespace mpt::data {

struct DataPosition {
  int64_t epoch = 0;          // 0-based
  int64_t batch = 0;          // next batch within the epoch
  int64_t batch_samples = 0;  // samples one batch step covers on all ranks together (0: not recorded)
};

// Data parallelism: rank `index` of `count` takes the index-th slice of every global batch of count x B
// samples, so the ranks of a step together see exactly the batch one process with count x B would.
struct Shard {
  int64_t index = 0;
  int64_t count = 1;
};

// Where the loader delivers batches. For a GPU every batch is staged in pinned host memory and copied without
// blocking the host, image batches cross as uint8 pixels and are finished on the device (image_batch.h), and the
// next batch of an in-memory dataset is made on a worker thread while the device trains on this one. Tests ask
// for the same work on the CPU.
struct Delivery {
  torch::Device device = torch::kCPU;
  bool finish_on_device = false;  // image batches: normalise, resize, augment and widen on `device`
  bool prefetch = false;          // in-memory datasets: make the next batch on a worker thread
  static Delivery to(torch::Device device) { return {device, device.is_cuda(), device.is_cuda()}; }
};

struct Batch {
  torch::Tensor inputs;   // images: FP32 (B, C, H, W), normalised; text: int64 token ids (B, S)
  torch::Tensor targets;  // int64 (B) labels, or (B, S) masked-LM targets (-100 where not predicted)
  // Masked-LM: int64 (M), the flat indices of the targets that are not -100, found on the host as the batch is
  // made, where counting them costs nothing (on a GPU, nonzero() waits for the device). Undefined otherwise.
  torch::Tensor target_positions;
};

class BatchLoader {
 public:
  // drop_last keeps every training batch the same shape; evaluation keeps the ragged tail (where a rank's
  // slice of the last batch may be empty). batch_size is per rank.
  BatchLoader(const Dataset& dataset, int64_t batch_size, bool shuffle, uint64_t seed, bool drop_last, Shard shard = {},
              Delivery delivery = {});
  ~BatchLoader();
  BatchLoader(const BatchLoader&) = delete;
  BatchLoader& operator=(const BatchLoader&) = delete;

  int64_t batches_per_epoch() const { return batches_per_epoch_; }
  DataPosition position() const { return {position_.epoch, position_.batch, batch_size_ * shard_.count}; }
  // Continues from `position`. One recorded with another global batch (a different world size) is re-sharded
  // to the batch holding its next sample, repeating at most one batch's samples; returns true when it was.
  bool seek(const DataPosition& position);

  // The batch at the current position, on the delivery device; advances, rolling over into the next epoch.
  Batch next();

 private:
  // A batch as made on the host (on a worker thread when prefetching), before it goes to the delivery device.
  struct HostBatch {
    Batch batch;
    bool pixels = false;                  // inputs are uint8 pixels, to be finished on the device
    std::optional<CropFlips> crop_flips;  // their augmentation
  };

  const torch::Tensor& order_for(int64_t epoch);  // the sample order of an epoch (the last two are kept)
  torch::Tensor indices_at(const DataPosition& position);
  uint64_t batch_seed(const DataPosition& position) const;
  DataPosition after(const DataPosition& position) const;
  HostBatch make_batch(const torch::Tensor& indices, uint64_t seed) const;  // thread-safe: reads the dataset only
  HostBatch image_batch(const torch::Tensor& indices, uint64_t seed) const;
  Batch file_batch(const torch::Tensor& indices, uint64_t seed) const;
  Batch token_batch(const torch::Tensor& indices, uint64_t seed) const;
  Batch deliver(HostBatch host) const;  // to the delivery device, finished there

  const Dataset& dataset_;
  int64_t batch_size_;
  Shard shard_;
  Delivery delivery_;
  bool shuffle_;
  uint64_t seed_;
  int64_t batches_per_epoch_;
  DataPosition position_;
  std::map<int64_t, torch::Tensor> orders_;  // epoch -> int64 permutation
  struct Pending {
    DataPosition position;
    std::future<HostBatch> batch;
  };
  std::deque<Pending> pending_;  // batches being made on workers, in order from position_
};

}  // namespace mpt::data
