// CIFAR-10 records, JPEG/PNG decoding, image folders with worker-thread prefetching, and augmentation that
// depends only on (seed, epoch, batch).
#include <catch2/catch.hpp>

#include <png.h>
#include <turbojpeg.h>

#include <filesystem>
#include <fstream>

#include "data/image_decode.h"
#include "data/image_folder.h"
#include "data/loader.h"
#include "tests/support/helpers.h"

using namespace mpt::data;
namespace fs = std::filesystem;

namespace {

// An RGB image whose pixel (y, x) is (value, y, x) clipped to 255: decodable content we can check.
std::vector<uint8_t> pixels(int width, int height, uint8_t value) {
  std::vector<uint8_t> rgb(static_cast<size_t>(width * height * 3));
  for (int y = 0; y < height; ++y)
    for (int x = 0; x < width; ++x) {
      uint8_t* p = &rgb[static_cast<size_t>((y * width + x) * 3)];
      p[0] = value, p[1] = static_cast<uint8_t>(std::min(255, y)), p[2] = static_cast<uint8_t>(std::min(255, x));
    }
  return rgb;
}

void write_jpeg(const std::string& path, int width, int height, uint8_t value) {
  std::vector<uint8_t> rgb = pixels(width, height, value);
  tjhandle handle = tjInitCompress();
  unsigned char* jpeg = nullptr;
  unsigned long size = 0;
  REQUIRE(tjCompress2(handle, rgb.data(), width, 0, height, TJPF_RGB, &jpeg, &size, TJSAMP_444, 95, 0) == 0);
  std::ofstream(path, std::ios::binary).write(reinterpret_cast<const char*>(jpeg), static_cast<std::streamsize>(size));
  tjFree(jpeg);
  tjDestroy(handle);
}

void write_png(const std::string& path, int width, int height, uint8_t value) {
  std::vector<uint8_t> rgb = pixels(width, height, value);
  png_image image{};
  image.version = PNG_IMAGE_VERSION;
  image.width = static_cast<png_uint_32>(width), image.height = static_cast<png_uint_32>(height);
  image.format = PNG_FORMAT_RGB;
  REQUIRE(png_image_write_to_file(&image, path.c_str(), 0, rgb.data(), 0, nullptr) != 0);
}

// ROOT/{train,val}/{cat,dog}: 6 training images per class (JPEG and PNG, several sizes), 2 per class in val.
std::string make_image_folder(const std::string& name) {
  const std::string root = mpt::testing::scratch_dir(name);
  for (const char* split : {"train", "val"})
    for (const char* label : {"cat", "dog"}) {
      const std::string folder = root + "/" + split + "/" + label;
      fs::create_directories(folder);
      const int count = std::string(split) == "train" ? 6 : 2;
      const uint8_t value = std::string(label) == "cat" ? 40 : 200;
      for (int i = 0; i < count; ++i) {
        if (i % 2)
          write_png(folder + "/" + std::to_string(i) + ".png", 40 + 7 * i, 30 + 5 * i, value);
        else
          write_jpeg(folder + "/" + std::to_string(i) + ".JPG", 50 + 3 * i, 60, value);
      }
      std::ofstream(folder + "/notes.txt") << "not an image\n";
    }
  return root;
}

void write_cifar(const std::string& path, int records, uint8_t label_of_first) {
  std::ofstream out(path, std::ios::binary);
  for (int r = 0; r < records; ++r) {
    out.put(static_cast<char>(r == 0 ? label_of_first : r % 10));
    for (int plane = 0; plane < 3; ++plane) out << std::string(1024, static_cast<char>(10 * (plane + 1)));
  }
}

}  // namespace

TEST_CASE("CIFAR-10 records: label byte then R, G, B planes, and malformed files name the offset", "[fast][data]") {
  const std::string root = mpt::testing::scratch_dir("cifar");
  for (int i = 1; i <= 5; ++i) write_cifar(root + "/data_batch_" + std::to_string(i) + ".bin", 4, 3);
  write_cifar(root + "/test_batch.bin", 3, 7);
  DataConfig config;
  config.name = "cifar10";
  config.root = root;
  const Dataset train = load_cifar10(config, "train", 0);
  CHECK(train.size() == 20);
  CHECK(train.images.sizes() == std::vector<int64_t>{20, 3, 32, 32});
  CHECK(train.images[0][0].eq(10).all().item<bool>());
  CHECK(train.images[0][2].eq(30).all().item<bool>());
  CHECK(train.labels[0].item<int64_t>() == 3);
  CHECK(train.mean.size() == 3);
  CHECK(load_cifar10(config, "test", 0).labels[0].item<int64_t>() == 7);
  CHECK(load_cifar10(config, "train", 6).size() == 6);

  write_cifar(root + "/test_batch.bin", 2, 12);
  CHECK_THROWS_WITH(load_cifar10(config, "test", 0), Catch::Contains("test_batch.bin: byte offset 0: label 12"));
  std::ofstream(root + "/test_batch.bin", std::ios::binary) << std::string(3000, '\0');
  CHECK_THROWS_WITH(load_cifar10(config, "test", 0),
                    Catch::Contains("3000 bytes is not a whole number of 3,073-byte records"));
}

TEST_CASE("JPEG and PNG decode to RGB (3, H, W), and anything else names the file", "[fast][data]") {
  const std::string dir = mpt::testing::scratch_dir("decode");
  write_png(dir + "/a.png", 20, 10, 77);
  const torch::Tensor png = decode_image(dir + "/a.png");
  CHECK(png.sizes() == std::vector<int64_t>{3, 10, 20});
  CHECK(png[0].eq(77).all().item<bool>());
  CHECK(png[2][4][13].item<uint8_t>() == 13);
  write_jpeg(dir + "/b.jpg", 33, 17, 120);
  const torch::Tensor jpeg = decode_image(dir + "/b.jpg");
  CHECK(jpeg.sizes() == std::vector<int64_t>{3, 17, 33});
  CHECK((jpeg[0].to(torch::kInt) - 120).abs().max().item<int>() <= 4);  // lossy, quality 95
  std::ofstream(dir + "/c.jpg") << "GIF89a...";
  CHECK_THROWS_WITH(decode_image(dir + "/c.jpg"), Catch::Contains("c.jpg: byte 0: not a JPEG"));
  std::ofstream(dir + "/d.jpg", std::ios::binary) << "\xFF\xD8\xFF\xE0 broken";
  CHECK_THROWS_WITH(decode_image(dir + "/d.jpg"), Catch::Contains("d.jpg: corrupt JPEG"));
}

TEST_CASE("an image folder lists classes, decodes batches on workers, and augments deterministically", "[fast][data]") {
  const std::string root = make_image_folder("image-folder");
  DataConfig config;
  config.name = "image_folder";
  config.root = root;
  config.image_size = 24;
  config.augment = true;
  CHECK(image_folder_classes(root) == std::vector<std::string>{"cat", "dog"});
  const Dataset train = load_image_folder(config, "train", 0);
  const Dataset val = load_image_folder(config, "val", 0);
  CHECK(train.size() == 12);
  CHECK(val.size() == 4);
  CHECK(val.labels.equal(torch::tensor({0, 0, 1, 1}, torch::kLong)));

  BatchLoader loader(train, 4, /*shuffle=*/true, /*seed=*/5, /*drop_last=*/true);
  std::vector<Batch> batches;
  std::vector<int64_t> seen;
  for (int b = 0; b < 6; ++b) {  // two epochs: the prefetch crosses the epoch boundary
    batches.push_back(loader.next());
    CHECK(batches.back().inputs.sizes() == std::vector<int64_t>{4, 3, 24, 24});
    if (b < 3)
      for (int64_t i = 0; i < 4; ++i) seen.push_back(batches.back().targets[i].item<int64_t>());
  }
  CHECK(std::count(seen.begin(), seen.end(), 0) == 6);  // each image once per epoch
  // Red channel: cats were encoded at 40, dogs at 200; normalisation keeps them far apart.
  const torch::Tensor red = batches[0].inputs.select(1, 0).mean({1, 2});
  for (int64_t i = 0; i < 4; ++i) CHECK((red[i].item<float>() > 0.0f) == (batches[0].targets[i].item<int64_t>() == 1));

  BatchLoader resumed(train, 4, true, 5, true);
  resumed.seek({1, 1});
  CHECK(resumed.next().inputs.equal(batches[4].inputs));  // the same crops and flips after a seek
  BatchLoader eval_a(val, 3, false, 0, false), eval_b(val, 3, false, 9, false);
  CHECK(eval_a.next().inputs.equal(eval_b.next().inputs));  // evaluation: no randomness at all

  fs::create_directories(root + "/val/bird");
  CHECK_THROWS_WITH(load_image_folder(config, "val", 0), Catch::Contains("class 'bird' is not in train/"));
  fs::remove_all(root + "/val/bird");
  std::ofstream(root + "/train/cat/9.png") << "not a png";
  const Dataset broken = load_image_folder(config, "train", 0);
  BatchLoader broken_loader(broken, 13, false, 0, false);
  CHECK_THROWS_WITH(broken_loader.next(), Catch::Contains("9.png: byte 0: not a JPEG"));
}

TEST_CASE("in-memory augmentation: padded random crops and flips, fixed by (seed, epoch, batch)", "[fast][data]") {
  Dataset dataset;
  dataset.images = torch::randint(0, 256, {16, 3, 8, 8}, torch::kUInt8);
  dataset.labels = torch::arange(16, torch::kLong);
  dataset.num_classes = 16;
  dataset.augment = true;
  BatchLoader a(dataset, 8, false, 1, true), b(dataset, 8, false, 1, true), c(dataset, 8, false, 2, true);
  const Batch first = a.next();
  CHECK(first.inputs.equal(b.next().inputs));
  CHECK_FALSE(first.inputs.equal(c.next().inputs));
  dataset.augment = false;
  BatchLoader plain(dataset, 8, false, 1, true);
  const Batch unaugmented = plain.next();
  CHECK_FALSE(first.inputs.equal(unaugmented.inputs));
  // Each augmented image is a shifted (and maybe flipped) copy: its mean stays close to the original's.
  CHECK(torch::allclose(first.inputs.mean(), unaugmented.inputs.mean(), 0.0, 0.2));
}

TEST_CASE("mpt train runs a ResNet on an image folder end to end", "[slow][cli]") {
  const std::string root = make_image_folder("image-folder-cli");
  const std::string spec = root + "/spec.yaml";
  std::ofstream(spec) << "model: {name: resnet18, small_input: true}\n"
                         "data: {name: image_folder, root: "
                      << root
                      << ", image_size: 32, batch_size: 4, augment: true}\n"
                         "precision: {mode: mixed}\n"
                         "optimizer: {name: sgd, lr: 0.01, momentum: 0.9}\n"
                         "train: {max_steps: 4, log_every_steps: 1}\n";
  mpt::testing::CommandResult run = mpt::testing::run_mpt({"train", spec, "--run-dir", root + "/run"});
  INFO(run.output);
  REQUIRE(run.exit_code == 0);
  const nlohmann::json summary = mpt::testing::read_json(root + "/run/summary.json");
  CHECK(summary["steps"] == 4);
  CHECK(summary["eval"]["samples"] == 4);
  CHECK_THAT(run.output, Catch::Contains("12 train / 4 test samples"));
}
