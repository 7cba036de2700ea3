// CIFAR-10's binary version (https://www.cs.toronto.edu/~kriz/cifar.html): fixed 3,073-byte records.
#include <filesystem>

#include "common/error.h"
#include "common/files.h"
#include "data/dataset.h"

namespace mpt::data {
namespace {

constexpr int64_t kRecordBytes = 1 + 3 * 32 * 32;
constexpr int64_t kClasses = 10;

std::string batch_folder(const std::string& root) {
  const std::string nested = root + "/cifar-10-batches-bin";  // the layout of the official tarball
  return std::filesystem::is_regular_file(nested + "/test_batch.bin") ? nested : root;
}

}  // namespace

Dataset load_cifar10(const DataConfig& config, const std::string& split, int64_t limit) {
  const std::string folder = batch_folder(config.root);
  std::vector<std::string> files;
  if (split == "train")
    for (int i = 1; i <= 5; ++i) files.push_back(folder + "/data_batch_" + std::to_string(i) + ".bin");
  else
    files.push_back(folder + "/test_batch.bin");

  std::vector<torch::Tensor> images, labels;
  int64_t total = 0;
  for (const std::string& path : files) {
    if (!std::filesystem::is_regular_file(path))
      throw Error(path + ": missing (CIFAR-10's binary version: data_batch_1..5.bin and test_batch.bin)");
    const std::string bytes = read_file(path);
    const auto size = static_cast<int64_t>(bytes.size());
    if (size == 0 || size % kRecordBytes != 0)
      throw Error(path + ": " + std::to_string(size) +
                  " bytes is not a whole number of 3,073-byte records (truncated?)");
    const int64_t records = size / kRecordBytes;
    torch::Tensor raw = torch::from_blob(const_cast<char*>(bytes.data()), {records, kRecordBytes}, torch::kUInt8);
    torch::Tensor record_labels = raw.select(1, 0).to(torch::kLong);
    const int64_t largest = record_labels.max().item<int64_t>();
    if (largest >= kClasses) {
      const int64_t record = record_labels.ge(kClasses).nonzero()[0][0].item<int64_t>();
      throw Error(path + ": byte offset " + std::to_string(record * kRecordBytes) + ": label " +
                  std::to_string(record_labels[record].item<int64_t>()) + " is outside 0..9");
    }
    images.push_back(raw.narrow(1, 1, kRecordBytes - 1).reshape({records, 3, 32, 32}).clone());
    labels.push_back(record_labels);
    total += records;
    if (limit > 0 && total >= limit) break;
  }
  Dataset dataset;
  dataset.images = torch::cat(images);
  dataset.labels = torch::cat(labels);
  if (limit > 0 && limit < dataset.size()) {
    dataset.images = dataset.images.narrow(0, 0, limit).clone();
    dataset.labels = dataset.labels.narrow(0, 0, limit).clone();
  }
  dataset.num_classes = kClasses;
  dataset.mean = {0.4914f, 0.4822f, 0.4465f};  // the training split's channel statistics
  dataset.std = {0.2470f, 0.2435f, 0.2616f};
  dataset.out_size = config.image_size;
  dataset.augment = config.augment && split == "train";
  return dataset;
}

}  // namespace mpt::data
