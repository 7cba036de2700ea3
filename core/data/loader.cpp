// The batch loader. The shuffle uses its own SplitMix64 stream rather than torch's generator, so the data
// order never shifts when model code draws random numbers (dropout, init) and is the same on every build.
#include "core/data/loader.h"

#include "core/common/error.h"
#include "core/data/masking.h"

namespace mpt::data {
namespace {

uint64_t splitmix64(uint64_t& state) {
  uint64_t z = (state += 0x9e3779b97f4a7c15ULL);
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
  return z ^ (z >> 31);
}

}  // namespace

BatchLoader::BatchLoader(const Dataset& dataset, int64_t batch_size, bool shuffle, uint64_t seed, bool drop_last)
    : dataset_(dataset), batch_size_(batch_size), shuffle_(shuffle), seed_(seed) {
  const int64_t n = dataset_.size();
  batches_per_epoch_ = drop_last ? n / batch_size_ : (n + batch_size_ - 1) / batch_size_;
  if (batches_per_epoch_ == 0)
    throw UsageError("data.batch_size = " + std::to_string(batch_size_) + " is larger than the " + std::to_string(n) +
                     " samples available; lower it or raise data.train_limit");
}

void BatchLoader::seek(const DataPosition& position) {
  MPT_CHECK(position.batch >= 0 && position.batch < batches_per_epoch_ && position.epoch >= 0,
            "data position out of range for this dataset (batch " + std::to_string(position.batch) + ")");
  position_ = position;
}

void BatchLoader::shuffle_for(int64_t epoch) {
  const int64_t n = dataset_.size();
  std::vector<int64_t> order(n);
  for (int64_t i = 0; i < n; ++i) order[i] = i;
  if (shuffle_) {
    uint64_t state = seed_ * 0x100000001b3ULL + static_cast<uint64_t>(epoch);
    for (int64_t i = n - 1; i > 0; --i) {  // Fisher-Yates; the modulo bias is < 2^-40 for these sizes
      int64_t j = static_cast<int64_t>(splitmix64(state) % static_cast<uint64_t>(i + 1));
      std::swap(order[i], order[j]);
    }
  }
  order_ = torch::tensor(order, torch::kLong);
  order_epoch_ = epoch;
}

Batch BatchLoader::image_batch(const torch::Tensor& indices) const {
  Batch batch;
  batch.inputs = dataset_.images.index_select(0, indices).to(torch::kFloat).div_(255.0f).sub_(dataset_.mean).div_(dataset_.std);
  if (dataset_.out_size > 0 && dataset_.out_size != batch.inputs.size(2)) {
    namespace F = torch::nn::functional;
    batch.inputs = F::interpolate(batch.inputs, F::InterpolateFuncOptions()
                                                    .size(std::vector<int64_t>{dataset_.out_size, dataset_.out_size})
                                                    .mode(torch::kBilinear)
                                                    .align_corners(false));
  }
  if (dataset_.out_channels > batch.inputs.size(1))  // grayscale -> RGB for ImageNet-style stems
    batch.inputs = batch.inputs.expand({-1, dataset_.out_channels, -1, -1}).contiguous();
  batch.targets = dataset_.labels.index_select(0, indices);
  return batch;
}

Batch BatchLoader::token_batch(const torch::Tensor& indices) const {
  const torch::Tensor tokens = dataset_.tokens.index_select(0, indices).to(torch::kLong);  // (B, S)
  if (!dataset_.masked_lm) return {tokens, dataset_.labels.index_select(0, indices)};
  // The masks depend only on (seed, epoch, batch): a resumed run re-draws exactly the masks it would have drawn.
  uint64_t state = seed_ ^ (static_cast<uint64_t>(position_.epoch) << 32) ^ static_cast<uint64_t>(position_.batch);
  MaskedTokens masked = mask_tokens(tokens, *dataset_.masked_lm, splitmix64(state));
  return {masked.inputs, masked.targets};
}

Batch BatchLoader::next() {
  if (order_epoch_ != position_.epoch) shuffle_for(position_.epoch);
  const int64_t start = position_.batch * batch_size_;
  const int64_t count = std::min(batch_size_, dataset_.size() - start);
  const torch::Tensor indices = order_.narrow(0, start, count);
  Batch batch = dataset_.tokens.defined() ? token_batch(indices) : image_batch(indices);
  if (++position_.batch == batches_per_epoch_) position_ = DataPosition{position_.epoch + 1, 0};
  return batch;
}

}  // namespace mpt::data
