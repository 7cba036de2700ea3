// The loader's order depends only on (seed, epoch), so seeking reproduces an uninterrupted run's batches.
#include <catch2/catch.hpp>

#include "data/loader.h"

using namespace mpt::data;

namespace {

Dataset counting_dataset(int64_t n) {
  Dataset dataset;
  dataset.images = torch::arange(n, torch::kUInt8).view({n, 1, 1, 1});
  dataset.labels = torch::arange(n, torch::kLong);
  dataset.num_classes = n;
  return dataset;
}

}  // namespace

TEST_CASE("every sample appears once per epoch, in a seed-dependent order", "[fast][data]") {
  Dataset dataset = counting_dataset(100);
  BatchLoader loader(dataset, 10, /*shuffle=*/true, /*seed=*/7, /*drop_last=*/true);
  std::vector<torch::Tensor> epoch;
  for (int b = 0; b < 10; ++b) epoch.push_back(loader.next().targets);
  auto all = std::get<0>(torch::cat(epoch).sort());
  CHECK(all.equal(torch::arange(100, torch::kLong)));
  CHECK(loader.position().epoch == 1);
  CHECK_FALSE(torch::cat(epoch).equal(torch::arange(100, torch::kLong)));

  BatchLoader other_seed(dataset, 10, true, 8, true);
  CHECK_FALSE(other_seed.next().targets.equal(epoch[0]));
}

TEST_CASE("seek reproduces the batches of an uninterrupted loader", "[fast][data]") {
  Dataset dataset = counting_dataset(50);
  BatchLoader straight(dataset, 8, true, 3, true);
  std::vector<torch::Tensor> expected;
  for (int b = 0; b < 20; ++b) expected.push_back(straight.next().targets);
  BatchLoader resumed(dataset, 8, true, 3, true);
  resumed.seek({1, 2});  // 6 batches per epoch: step 8 is epoch 1, batch 2
  for (int b = 8; b < 20; ++b) CHECK(resumed.next().targets.equal(expected[b]));
}

TEST_CASE("inputs are FP32 and normalised with the dataset's statistics", "[fast][data]") {
  Dataset dataset = counting_dataset(4);
  dataset.mean = {0.5f};
  dataset.std = {0.25f};
  BatchLoader loader(dataset, 4, false, 0, false);
  Batch batch = loader.next();
  CHECK(batch.inputs.dtype() == torch::kFloat);
  CHECK(batch.inputs.view(-1)[2].item<float>() == Approx((2.0f / 255 - 0.5f) / 0.25f));

  dataset.mean = {0.5f, 0.5f, 0.5f};  // three channels' statistics for one-channel images
  BatchLoader mismatched(dataset, 4, false, 0, false);
  CHECK_THROWS_WITH(mismatched.next(), Catch::Contains("one per image channel"));
}

TEST_CASE("a shuffled batch is gathered and normalised per channel exactly as the tensor ops would", "[fast][data]") {
  Dataset dataset;
  dataset.images = torch::randint(0, 256, {40, 3, 5, 7}, torch::TensorOptions().dtype(torch::kUInt8));
  dataset.labels = torch::arange(40, torch::kLong);
  dataset.num_classes = 40;
  dataset.mean = {0.49f, 0.48f, 0.45f};
  dataset.std = {0.25f, 0.24f, 0.26f};
  BatchLoader loader(dataset, 16, /*shuffle=*/true, /*seed=*/5, /*drop_last=*/true);
  for (int b = 0; b < 2; ++b) {
    const Batch batch = loader.next();
    const torch::Tensor expected = dataset.images.index_select(0, batch.targets)
                                       .to(torch::kFloat)
                                       .div_(255.0f)
                                       .sub_(torch::tensor(dataset.mean).view({1, 3, 1, 1}))
                                       .div_(torch::tensor(dataset.std).view({1, 3, 1, 1}));
    CHECK(torch::equal(batch.inputs, expected));  // bit for bit: the same float operations in the same order
  }
}

TEST_CASE("a batch larger than the dataset is a usage error", "[fast][data]") {
  Dataset dataset = counting_dataset(4);
  CHECK_THROWS_WITH(BatchLoader(dataset, 8, true, 0, true), Catch::Contains("data.batch_size = 8"));
}

TEST_CASE("batches can be resized and made RGB for ImageNet-style models", "[fast][data]") {
  Dataset dataset = counting_dataset(4);
  dataset.images = torch::full({4, 1, 28, 28}, 255, torch::kUInt8);
  dataset.out_size = 64;
  dataset.out_channels = 3;
  BatchLoader loader(dataset, 2, false, 0, false);
  Batch batch = loader.next();
  CHECK(batch.inputs.sizes() == torch::IntArrayRef({2, 3, 64, 64}));
  CHECK(batch.inputs.allclose(torch::full({2, 3, 64, 64}, 1.0f)));  // (255/255 - 0) / 1: values survive
}
