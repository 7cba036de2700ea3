// The batch loader. The shuffle uses its own SplitMix64 stream rather than torch's generator, so the data
// order never shifts when model code draws random numbers (dropout, init) and is the same on every build.
#include "core/data/loader.h"

#include "core/common/error.h"
#include "core/data/image_decode.h"
#include "core/data/image_folder.h"
#include "core/data/masking.h"

namespace mpt::data {
namespace {

uint64_t splitmix64(uint64_t& state) {
  uint64_t z = (state += 0x9e3779b97f4a7c15ULL);
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
  return z ^ (z >> 31);
}

// (x - mean) / std per channel, in place; one mean/std value applies to every channel.
void normalise(torch::Tensor& x, const std::vector<float>& mean, const std::vector<float>& std) {
  if (mean.size() == 1) {
    x.sub_(mean[0]).div_(std[0]);
    return;
  }
  const auto channels = static_cast<int64_t>(mean.size());
  x.sub_(torch::tensor(mean).view({1, channels, 1, 1})).div_(torch::tensor(std).view({1, channels, 1, 1}));
}

// normalise(images[indices] / 255) in one pass over the batch, for uint8 (N, C, H, W) images: the same float
// operations in the same order as the tensor ops (`to`, `div_`, `sub_`, `div_`), which took five passes and
// 7-8% of the FP32 MLP's step.
torch::Tensor gather_normalised(const torch::Tensor& images, const torch::Tensor& indices,
                                const std::vector<float>& mean, const std::vector<float>& std) {
  MPT_CHECK(images.scalar_type() == torch::kUInt8, "in-memory images must be uint8");
  const int64_t count = indices.size(0), channels = images.size(1);
  const auto fits = [&](const std::vector<float>& values) {
    return values.size() == 1 || static_cast<int64_t>(values.size()) == channels;
  };
  MPT_CHECK(fits(mean) && fits(std), "normalisation needs one mean and std, or one per image channel");
  const int64_t plane = images.size(2) * images.size(3), sample = channels * plane;
  torch::Tensor out = torch::empty({count, channels, images.size(2), images.size(3)}, torch::kFloat);
  const uint8_t* source = images.data_ptr<uint8_t>();
  const int64_t* index = indices.data_ptr<int64_t>();
  float* target = out.data_ptr<float>();
  const int64_t samples = images.size(0);
  for (int64_t i = 0; i < count; ++i)
    MPT_CHECK(index[i] >= 0 && index[i] < samples, "sample index out of range");
  at::parallel_for(0, count * channels, std::max<int64_t>(1, (1 << 14) / plane), [&](int64_t begin, int64_t end) {
    for (int64_t row = begin; row < end; ++row) {  // one channel plane of one sample
      const int64_t i = row / channels, c = row % channels;
      const float m = mean.size() == 1 ? mean[0] : mean[static_cast<size_t>(c)];
      const float s = std.size() == 1 ? std[0] : std[static_cast<size_t>(c)];
      const uint8_t* in = source + index[i] * sample + c * plane;
      float* o = target + row * plane;
      for (int64_t j = 0; j < plane; ++j) o[j] = (static_cast<float>(in[j]) / 255.0f - m) / s;
    }
  });
  return out;
}

}  // namespace

BatchLoader::BatchLoader(const Dataset& dataset, int64_t batch_size, bool shuffle, uint64_t seed, bool drop_last,
                         Shard shard)
    : dataset_(dataset), batch_size_(batch_size), shard_(shard), shuffle_(shuffle), seed_(seed) {
  MPT_CHECK(shard_.count >= 1 && shard_.index >= 0 && shard_.index < shard_.count, "bad data shard");
  const int64_t n = dataset_.size(), global = batch_size_ * shard_.count;
  batches_per_epoch_ = drop_last ? n / global : (n + global - 1) / global;
  if (batches_per_epoch_ == 0)
    throw UsageError("data.batch_size = " + std::to_string(batch_size_) +
                     (shard_.count > 1 ? " x " + std::to_string(shard_.count) + " ranks" : std::string()) +
                     " is larger than the " + std::to_string(n) +
                     " samples available; lower it or raise data.train_limit");
}

BatchLoader::~BatchLoader() {
  for (auto& p : pending_)
    if (p.batch.valid()) p.batch.wait();  // workers read dataset_ and must finish before it may go
}

bool BatchLoader::seek(const DataPosition& position) {
  DataPosition target{position.epoch, position.batch};
  const int64_t global = batch_size_ * shard_.count;
  const bool reshard = position.batch_samples > 0 && position.batch_samples != global;
  if (reshard) {  // the batch holding the first sample not yet seen
    target.batch = position.batch * position.batch_samples / global;
    if (target.batch >= batches_per_epoch_) target = {position.epoch + 1, 0};
  }
  MPT_CHECK(target.batch >= 0 && target.batch < batches_per_epoch_ && target.epoch >= 0,
            "data position out of range for this dataset (batch " + std::to_string(target.batch) + ")");
  for (auto& p : pending_)
    if (p.batch.valid()) p.batch.wait();
  pending_.clear();
  position_ = target;
  return reshard;
}

const torch::Tensor& BatchLoader::order_for(int64_t epoch) {
  auto it = orders_.find(epoch);
  if (it != orders_.end()) return it->second;
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
  while (orders_.size() >= 2) orders_.erase(orders_.begin());  // prefetching spans at most two epochs
  return orders_[epoch] = torch::tensor(order, torch::kLong);
}

torch::Tensor BatchLoader::indices_at(const DataPosition& position) {
  const int64_t n = dataset_.size();
  const int64_t start = std::min(n, (position.batch * shard_.count + shard_.index) * batch_size_);
  const int64_t count = std::min(batch_size_, n - start);
  return order_for(position.epoch).narrow(0, start, count);
}

uint64_t BatchLoader::batch_seed(const DataPosition& position) const {
  uint64_t state = seed_ ^ (static_cast<uint64_t>(position.epoch) << 32) ^ static_cast<uint64_t>(position.batch);
  if (shard_.count > 1) state ^= static_cast<uint64_t>(shard_.index + 1) << 48;  // ranks draw different masks
  return splitmix64(state);
}

DataPosition BatchLoader::after(const DataPosition& position) const {
  return position.batch + 1 == batches_per_epoch_ ? DataPosition{position.epoch + 1, 0}
                                                  : DataPosition{position.epoch, position.batch + 1};
}

Batch BatchLoader::image_batch(const torch::Tensor& indices, uint64_t seed) const {
  Batch batch;
  batch.inputs = gather_normalised(dataset_.images.contiguous(), indices.contiguous(), dataset_.mean, dataset_.std);
  if (dataset_.out_size > 0 && dataset_.out_size != batch.inputs.size(2)) {
    namespace F = torch::nn::functional;
    batch.inputs = F::interpolate(batch.inputs, F::InterpolateFuncOptions()
                                                    .size(std::vector<int64_t>{dataset_.out_size, dataset_.out_size})
                                                    .mode(torch::kBilinear)
                                                    .align_corners(false));
  }
  if (dataset_.augment) {  // random crop from a zero (= mean) padded image, and a horizontal flip per sample
    torch::Generator generator = at::detail::createCPUGenerator(seed);
    const int64_t count = batch.inputs.size(0), height = batch.inputs.size(2), width = batch.inputs.size(3);
    const int64_t pad = std::max<int64_t>(1, height / 8);
    const torch::Tensor padded = torch::constant_pad_nd(batch.inputs, {pad, pad, pad, pad}, 0.0);
    const torch::Tensor offsets = torch::randint(0, 2 * pad + 1, {count, 2}, generator, torch::kLong);
    const torch::Tensor flips = torch::rand({count}, generator).lt(0.5);
    auto offset = offsets.accessor<int64_t, 2>();
    auto flip = flips.accessor<bool, 1>();
    for (int64_t i = 0; i < count; ++i) {
      torch::Tensor crop = padded[i].narrow(1, offset[i][0], height).narrow(2, offset[i][1], width);
      batch.inputs[i].copy_(flip[i] ? crop.flip({2}) : crop);
    }
  }
  if (dataset_.out_channels > batch.inputs.size(1))  // grayscale -> RGB for ImageNet-style stems
    batch.inputs = batch.inputs.expand({-1, dataset_.out_channels, -1, -1}).contiguous();
  batch.targets = dataset_.labels.index_select(0, indices);
  return batch;
}

Batch BatchLoader::file_batch(const torch::Tensor& indices, uint64_t seed) const {
  const int64_t count = indices.size(0), size = dataset_.out_size;
  Batch batch{torch::empty({count, 3, size, size}), dataset_.labels.index_select(0, indices)};
  auto index = indices.accessor<int64_t, 1>();
  for (int64_t i = 0; i < count; ++i) {
    uint64_t sample_state = seed + static_cast<uint64_t>(i);
    const torch::Tensor image = decode_image(dataset_.files[static_cast<size_t>(index[i])]);
    batch.inputs[i].copy_(transform_image(image, size, dataset_.augment, splitmix64(sample_state)));
  }
  normalise(batch.inputs, dataset_.mean, dataset_.std);
  return batch;
}

Batch BatchLoader::token_batch(const torch::Tensor& indices, uint64_t seed) const {
  const torch::Tensor tokens = dataset_.tokens.index_select(0, indices).to(torch::kLong);  // (B, S)
  if (!dataset_.masked_lm) return {tokens, dataset_.labels.index_select(0, indices)};
  MaskedTokens masked = mask_tokens(tokens, *dataset_.masked_lm, seed);
  return {masked.inputs, masked.targets};
}

Batch BatchLoader::make_batch(const torch::Tensor& indices, uint64_t seed) const {
  if (dataset_.tokens.defined()) return token_batch(indices, seed);
  if (dataset_.from_files()) return file_batch(indices, seed);
  return image_batch(indices, seed);
}

Batch BatchLoader::next() {
  Batch batch;
  if (!dataset_.from_files()) {
    batch = make_batch(indices_at(position_), batch_seed(position_));
  } else {
    // Keep `workers` batches in flight, in order from the current position.
    const size_t in_flight = static_cast<size_t>(std::max<int64_t>(1, dataset_.workers));
    DataPosition next_position = pending_.empty() ? position_ : after(pending_.back().position);
    while (pending_.size() < in_flight) {
      torch::Tensor indices = indices_at(next_position).clone();
      const uint64_t seed = batch_seed(next_position);
      pending_.push_back({next_position, std::async(std::launch::async, [this, indices, seed] {
                            return make_batch(indices, seed);
                          })});
      next_position = after(next_position);
    }
    MPT_CHECK(pending_.front().position.epoch == position_.epoch && pending_.front().position.batch == position_.batch,
              "prefetched batch out of order");
    std::future<Batch> ready = std::move(pending_.front().batch);
    pending_.pop_front();
    batch = ready.get();  // rethrows a worker's decoding error
  }
  position_ = after(position_);
  return batch;
}

}  // namespace mpt::data
