// Image batches finished on the device (a GPU's path, run here on the CPU) must be the batches the host makes.
#include <catch2/catch.hpp>

#include "data/image_batch.h"
#include "data/loader.h"

using namespace mpt::data;

namespace {

Dataset random_images(int64_t n, int64_t channels, int64_t size) {
  Dataset dataset;
  dataset.images = torch::randint(0, 256, {n, channels, size, size}, torch::TensorOptions().dtype(torch::kUInt8));
  dataset.labels = torch::arange(n, torch::kLong);
  dataset.num_classes = n;
  return dataset;
}

// What the GPU path does, on the CPU: uint8 pixels leave the host, the next batch is made on a worker thread.
Delivery finished_on_device() { return {torch::kCPU, /*finish_on_device=*/true, /*prefetch=*/true}; }

}  // namespace

TEST_CASE("batches finished on the device equal the host's bit for bit, resized, augmented and widened",
          "[fast][data]") {
  torch::manual_seed(3);
  Dataset grayscale = random_images(40, 1, 12);  // Fashion-MNIST's case: resized and replicated to RGB
  grayscale.mean = {0.29f};
  grayscale.std = {0.35f};
  grayscale.out_size = 16;
  grayscale.out_channels = 3;
  Dataset colour = random_images(40, 3, 9);  // CIFAR's case: statistics per channel
  colour.mean = {0.49f, 0.48f, 0.45f};
  colour.std = {0.25f, 0.24f, 0.26f};
  for (Dataset* dataset : {&grayscale, &colour}) {
    for (bool augment : {false, true}) {
      dataset->augment = augment;
      BatchLoader host(*dataset, 16, /*shuffle=*/true, /*seed=*/5, /*drop_last=*/true);
      BatchLoader device(*dataset, 16, true, 5, true, Shard{}, finished_on_device());
      for (int b = 0; b < 5; ++b) {  // 2 batches per epoch: the prefetch crosses epochs
        const Batch expected = host.next(), got = device.next();
        CHECK(got.inputs.sizes() == expected.inputs.sizes());
        CHECK(torch::equal(got.inputs, expected.inputs));
        CHECK(torch::equal(got.targets, expected.targets));
      }
      host.seek({4, 1});
      device.seek({4, 1});  // drops the prefetched batch
      CHECK(torch::equal(device.next().inputs, host.next().inputs));
    }
  }
}

TEST_CASE("crops and flips are the padded image's windows, mirrored where drawn", "[fast][data]") {
  Dataset dataset = random_images(6, 2, 8);
  const torch::Tensor x = dataset.images.to(torch::kFloat);
  const CropFlips draws = draw_crop_flips(6, 8, /*seed=*/11);
  CHECK(draws.pad == 1);
  CHECK(draws.offsets.min().item<int64_t>() >= 0);
  CHECK(draws.offsets.max().item<int64_t>() <= 2 * draws.pad);
  const torch::Tensor shaped = shape_images(x, dataset, &draws);
  const torch::Tensor padded = torch::constant_pad_nd(x, {1, 1, 1, 1}, 0.0);
  for (int64_t i = 0; i < 6; ++i) {  // one window per image, as a per-image copy would take it
    const torch::Tensor window =
        padded[i].narrow(1, draws.offsets[i][0].item<int64_t>(), 8).narrow(2, draws.offsets[i][1].item<int64_t>(), 8);
    CHECK(torch::equal(shaped[i], draws.flips[i].item<bool>() ? window.flip({2}) : window));
  }
  // Another seed draws other windows; both kinds of flip occur among 64 draws.
  CHECK_FALSE(torch::equal(draw_crop_flips(6, 8, 12).offsets, draws.offsets));
  const torch::Tensor many = draw_crop_flips(64, 8, 11).flips;
  CHECK(many.any().item<bool>());
  CHECK_FALSE(many.all().item<bool>());
}

TEST_CASE("pixels are gathered as they are, and bad indices and statistics are named", "[fast][data]") {
  Dataset dataset = random_images(10, 3, 4);
  const torch::Tensor indices = torch::tensor(std::vector<int64_t>{7, 0, 7, 3});
  CHECK(
      torch::equal(gather_pixels(dataset.images, indices, /*pinned=*/false), dataset.images.index_select(0, indices)));
  CHECK_THROWS_WITH(gather_pixels(dataset.images, torch::tensor(std::vector<int64_t>{10}), false),
                    Catch::Contains("sample index out of range"));
  CHECK_THROWS_WITH(normalise_pixels(dataset.images, {0.5f, 0.5f}, {0.2f}), Catch::Contains("one per image channel"));

  dataset.mean = {0.5f, 0.5f};  // three channels: named when the batch is finished, on next()
  BatchLoader loader(dataset, 4, false, 0, false, Shard{}, finished_on_device());
  CHECK_THROWS_WITH(loader.next(), Catch::Contains("one per image channel"));
}
