// Fashion-MNIST from Debian's dataset-fashion-mnist (or any folder with the same four IDX files).
#include "common/error.h"
#include "common/files.h"
#include "data/dataset.h"
#include "data/idx.h"

namespace mpt::data {
namespace {

constexpr int64_t kClasses = 10;
// Training-split pixel statistics (0..1 scale), the usual Fashion-MNIST normalisation.
constexpr float kMean = 0.2860f;
constexpr float kStd = 0.3530f;

}  // namespace

std::vector<std::string> fashion_mnist_stems() {
  return {"train-images-idx3-ubyte", "train-labels-idx1-ubyte", "t10k-images-idx3-ubyte", "t10k-labels-idx1-ubyte"};
}

std::string find_idx_file(const std::string& root, const std::string& stem) {
  for (const auto& candidate : {root + "/" + stem + ".gz", root + "/" + stem})
    if (path_problem(candidate, PathKind::kFile).empty()) return candidate;
  return "";
}

Dataset load_fashion_mnist(const DataConfig& config, const std::string& split, int64_t limit) {
  const std::string& root = config.root;
  const std::string images_path = find_idx_file(root, split + "-images-idx3-ubyte");
  const std::string labels_path = find_idx_file(root, split + "-labels-idx1-ubyte");
  if (images_path.empty() || labels_path.empty())
    throw Error(root + ": missing " + split + "-{images-idx3,labels-idx1}-ubyte[.gz] (install dataset-fashion-mnist)");

  IdxArray images = read_idx(images_path, 3);
  IdxArray labels = read_idx(labels_path, 1);
  if (images.dims[0] != labels.dims[0])
    throw Error(images_path + ": holds " + std::to_string(images.dims[0]) + " images but " + labels_path + " holds " +
                std::to_string(labels.dims[0]) + " labels");
  for (size_t i = 0; i < labels.values.size(); ++i)
    if (labels.values[i] >= kClasses)
      throw Error(labels_path + ": label " + std::to_string(labels.values[i]) + " at data byte " +
                  std::to_string(8 + i) + " is outside 0.." + std::to_string(kClasses - 1));

  int64_t n = images.dims[0];
  if (limit > 0) n = std::min(n, limit);
  const int64_t height = images.dims[1], width = images.dims[2];
  Dataset dataset;
  dataset.images =
      torch::from_blob(images.values.data(), {images.dims[0], 1, height, width}, torch::kUInt8).narrow(0, 0, n).clone();
  dataset.labels =
      torch::from_blob(labels.values.data(), {labels.dims[0]}, torch::kUInt8).narrow(0, 0, n).to(torch::kLong);
  dataset.num_classes = kClasses;
  dataset.mean = {kMean};
  dataset.std = {kStd};
  dataset.augment = config.augment && split == "train";
  dataset.out_channels = config.channels;
  dataset.out_size = config.image_size;
  return dataset;
}

}  // namespace mpt::data
