// The batch loader. The shuffle uses its own SplitMix64 stream rather than torch's generator, so the data
// order never shifts when model code draws random numbers (dropout, init) and is the same on every build.
#include "data/loader.h"

#include "common/error.h"
#include "data/image_decode.h"
#include "data/image_folder.h"
#include "data/masking.h"

namespace mpt::data {
namespace {

uint64_t splitmix64(uint64_t& state) {
  uint64_t z = (state += 0x9e3779b97f4a7c15ULL);
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
  return z ^ (z >> 31);
}

}  // namespace

BatchLoader::BatchLoader(const Dataset& dataset, int64_t batch_size, bool shuffle, uint64_t seed, bool drop_last,
                         Shard shard, Delivery delivery)
    : dataset_(dataset), batch_size_(batch_size), shard_(shard), delivery_(delivery), shuffle_(shuffle), seed_(seed) {
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

BatchLoader::HostBatch BatchLoader::image_batch(const torch::Tensor& indices, uint64_t seed) const {
  HostBatch host;
  const torch::Tensor images = dataset_.images.contiguous();
  std::optional<CropFlips> crop_flips;
  if (dataset_.augment) {
    const int64_t height = dataset_.out_size > 0 ? dataset_.out_size : images.size(2);  // after resizing
    crop_flips = draw_crop_flips(indices.size(0), height, seed);
  }
  if (delivery_.finish_on_device) {
    host.batch.inputs = gather_pixels(images, indices.contiguous(), /*pinned=*/delivery_.device.is_cuda());
    host.pixels = true;
    host.crop_flips = std::move(crop_flips);
  } else {
    host.batch.inputs = shape_images(gather_normalised(images, indices.contiguous(), dataset_.mean, dataset_.std),
                                     dataset_, crop_flips ? &*crop_flips : nullptr);
  }
  host.batch.targets = dataset_.labels.index_select(0, indices);
  return host;
}

Batch BatchLoader::file_batch(const torch::Tensor& indices, uint64_t seed) const {
  const int64_t count = indices.size(0), size = dataset_.out_size;
  Batch batch{torch::empty({count, 3, size, size}), dataset_.labels.index_select(0, indices), {}};
  auto index = indices.accessor<int64_t, 1>();
  for (int64_t i = 0; i < count; ++i) {
    uint64_t sample_state = seed + static_cast<uint64_t>(i);
    const torch::Tensor image = decode_image(dataset_.files[static_cast<size_t>(index[i])]);
    batch.inputs[i].copy_(transform_image(image, size, dataset_.augment, splitmix64(sample_state)));
  }
  normalise_(batch.inputs, dataset_.mean, dataset_.std);
  return batch;
}

Batch BatchLoader::token_batch(const torch::Tensor& indices, uint64_t seed) const {
  const torch::Tensor tokens = dataset_.tokens.index_select(0, indices).to(torch::kLong);  // (B, S), or S + 1
  if (dataset_.causal_lm) {
    const int64_t s = tokens.size(1) - 1;
    const torch::Tensor inputs = tokens.narrow(1, 0, s).contiguous();
    const torch::Tensor targets =
        tokens.narrow(1, 1, s).masked_fill(inputs.eq(dataset_.causal_lm->eot_id), kIgnoredTarget);
    return {inputs, targets, target_positions(targets)};
  }
  if (!dataset_.masked_lm) return {tokens, dataset_.labels.index_select(0, indices), {}};
  MaskedTokens masked = mask_tokens(tokens, *dataset_.masked_lm, seed);
  return {masked.inputs, masked.targets, target_positions(masked.targets)};
}

BatchLoader::HostBatch BatchLoader::make_batch(const torch::Tensor& indices, uint64_t seed) const {
  HostBatch host;
  if (dataset_.tokens.defined())
    host.batch = token_batch(indices, seed);
  else if (dataset_.from_files())
    host.batch = file_batch(indices, seed);
  else
    host = image_batch(indices, seed);
  if (delivery_.device.is_cuda()) {  // a copy that does not block the host needs pinned memory
    auto pin = [](torch::Tensor& t) {
      if (!t.is_pinned()) t = t.pin_memory();
    };
    pin(host.batch.inputs);
    pin(host.batch.targets);
    if (host.batch.target_positions.defined()) pin(host.batch.target_positions);
    if (host.crop_flips) pin(host.crop_flips->offsets), pin(host.crop_flips->flips);
  }
  return host;
}

Batch BatchLoader::deliver(HostBatch host) const {
  const torch::Device device = delivery_.device;
  const bool non_blocking = device.is_cuda();  // from the pinned memory make_batch staged it in
  const auto send = [&](const torch::Tensor& t) { return t.to(device, non_blocking); };
  const torch::Tensor& positions = host.batch.target_positions;
  Batch batch{send(host.batch.inputs), send(host.batch.targets), positions.defined() ? send(positions) : positions};
  if (host.pixels) {
    std::optional<CropFlips> crop_flips;
    if (host.crop_flips)
      crop_flips = CropFlips{host.crop_flips->pad, send(host.crop_flips->offsets), send(host.crop_flips->flips)};
    batch.inputs = shape_images(normalise_pixels(batch.inputs, dataset_.mean, dataset_.std), dataset_,
                                crop_flips ? &*crop_flips : nullptr);
  }
  return batch;
}

Batch BatchLoader::next() {
  HostBatch host;
  // File datasets keep `workers` batches decoding; a prefetching in-memory one makes the next batch while the
  // device trains on this one.
  const size_t in_flight = dataset_.from_files() ? static_cast<size_t>(std::max<int64_t>(1, dataset_.workers))
                           : delivery_.prefetch  ? 2
                                                 : 0;
  if (in_flight == 0) {
    host = make_batch(indices_at(position_), batch_seed(position_));
  } else {
    // Keep `in_flight` batches in flight, in order from the current position.
    DataPosition next_position = pending_.empty() ? position_ : after(pending_.back().position);
    while (pending_.size() < in_flight) {
      torch::Tensor indices = indices_at(next_position).clone();
      const uint64_t seed = batch_seed(next_position);
      pending_.push_back(
          {next_position, std::async(std::launch::async, [this, indices, seed] { return make_batch(indices, seed); })});
      next_position = after(next_position);
    }
    MPT_CHECK(pending_.front().position.epoch == position_.epoch && pending_.front().position.batch == position_.batch,
              "prefetched batch out of order");
    std::future<HostBatch> ready = std::move(pending_.front().batch);
    pending_.pop_front();
    host = ready.get();  // rethrows a worker's error (a file that does not decode)
  }
  position_ = after(position_);
  return deliver(std::move(host));
}

}  // namespace mpt::data
