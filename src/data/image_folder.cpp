// Image folders: class-per-sub-folder listing and the torchvision-style transforms, per sample.
#include <algorithm>
#include <cmath>
#include <filesystem>
#include <random>

#include "common/error.h"
#include "data/dataset.h"
#include "data/image_folder.h"

namespace mpt::data {
namespace fs = std::filesystem;
namespace {

bool is_image(const fs::path& path) {
  std::string ext = path.extension().string();
  std::transform(ext.begin(), ext.end(), ext.begin(), [](unsigned char c) { return std::tolower(c); });
  return ext == ".jpg" || ext == ".jpeg" || ext == ".png";
}

std::string split_folder(const std::string& root, const std::string& split) {
  if (split == "train") return root + "/train";
  for (const char* name : {"val", "test"})
    if (fs::is_directory(root + "/" + name)) return root + "/" + name;
  throw Error(root + ": no val/ or test/ folder for evaluation (expected ROOT/train/<class>/ and ROOT/val/<class>/)");
}

torch::Tensor resize(const torch::Tensor& image, int64_t height, int64_t width) {  // FP32 (3, h, w)
  namespace F = torch::nn::functional;
  return F::interpolate(image.unsqueeze(0), F::InterpolateFuncOptions()
                                                .size(std::vector<int64_t>{height, width})
                                                .mode(torch::kBilinear)
                                                .align_corners(false))
      .squeeze(0);
}

}  // namespace

std::vector<std::string> image_folder_classes(const std::string& root) {
  const std::string train = root + "/train";
  if (!fs::is_directory(train)) throw Error(root + ": no train/ folder (expected ROOT/train/<class>/*.jpg)");
  std::vector<std::string> classes;
  for (const auto& entry : fs::directory_iterator(train))
    if (entry.is_directory()) classes.push_back(entry.path().filename().string());
  std::sort(classes.begin(), classes.end());
  if (classes.empty()) throw Error(train + ": no class folders");
  return classes;
}

Dataset load_image_folder(const DataConfig& config, const std::string& split, int64_t limit) {
  const std::vector<std::string> classes = image_folder_classes(config.root);
  const std::string folder = split_folder(config.root, split);
  Dataset dataset;
  std::vector<int64_t> labels;
  for (size_t label = 0; label < classes.size(); ++label) {
    const fs::path class_folder = fs::path(folder) / classes[label];
    if (!fs::is_directory(class_folder)) continue;  // a class with no evaluation images
    std::vector<std::string> files;
    for (const auto& entry : fs::recursive_directory_iterator(class_folder))
      if (entry.is_regular_file() && is_image(entry.path())) files.push_back(entry.path().string());
    std::sort(files.begin(), files.end());
    for (auto& file : files) dataset.files.push_back(std::move(file)), labels.push_back(static_cast<int64_t>(label));
  }
  for (const auto& entry : fs::directory_iterator(folder))
    if (entry.is_directory() && !std::binary_search(classes.begin(), classes.end(), entry.path().filename().string()))
      throw Error(entry.path().string() + ": class '" + entry.path().filename().string() + "' is not in train/");
  if (dataset.files.empty()) throw Error(folder + ": no .jpg, .jpeg or .png images under its class folders");
  if (limit > 0 && limit < static_cast<int64_t>(dataset.files.size())) {
    // Spread the limit over the classes: every k-th file rather than the first class only.
    const double stride = static_cast<double>(dataset.files.size()) / static_cast<double>(limit);
    std::vector<std::string> files;
    std::vector<int64_t> kept;
    for (int64_t i = 0; i < limit; ++i) {
      const auto at = static_cast<size_t>(static_cast<double>(i) * stride);
      files.push_back(dataset.files[at]), kept.push_back(labels[at]);
    }
    dataset.files = std::move(files), labels = std::move(kept);
  }
  dataset.labels = torch::tensor(labels, torch::kLong);
  dataset.num_classes = static_cast<int64_t>(classes.size());
  dataset.mean = {0.485f, 0.456f, 0.406f};  // ImageNet's statistics, what pretrained torchvision weights expect
  dataset.std = {0.229f, 0.224f, 0.225f};
  dataset.out_size = config.image_size > 0 ? config.image_size : 224;
  dataset.augment = config.augment && split == "train";
  dataset.workers = config.workers;
  return dataset;
}

torch::Tensor transform_image(const torch::Tensor& image, int64_t size, bool augment, uint64_t seed) {
  torch::Tensor x = image.to(torch::kFloat).div_(255.0f);  // (3, H, W)
  const int64_t height = x.size(1), width = x.size(2);
  if (!augment) {  // resize the shorter side to 8/7 of the size, then take the center
    const int64_t shorter = static_cast<int64_t>(std::lround(static_cast<double>(size) * 8.0 / 7.0));
    const double scale = static_cast<double>(shorter) / static_cast<double>(std::min(height, width));
    const int64_t h = std::max(size, static_cast<int64_t>(std::lround(height * scale)));
    const int64_t w = std::max(size, static_cast<int64_t>(std::lround(width * scale)));
    return resize(x, h, w).narrow(1, (h - size) / 2, size).narrow(2, (w - size) / 2, size);
  }
  // torchvision's RandomResizedCrop(scale=(0.08, 1), ratio=(3/4, 4/3)) and RandomHorizontalFlip.
  std::mt19937_64 rng(seed);
  std::uniform_real_distribution<double> area_share(0.08, 1.0), log_ratio(std::log(3.0 / 4.0), std::log(4.0 / 3.0));
  int64_t top = 0, left = 0, crop_h = height, crop_w = width;
  bool found = false;
  for (int attempt = 0; attempt < 10 && !found; ++attempt) {
    const double area = static_cast<double>(height * width) * area_share(rng);
    const double ratio = std::exp(log_ratio(rng));
    const auto w = static_cast<int64_t>(std::lround(std::sqrt(area * ratio)));
    const auto h = static_cast<int64_t>(std::lround(std::sqrt(area / ratio)));
    if (w > 0 && h > 0 && w <= width && h <= height) {
      top = std::uniform_int_distribution<int64_t>(0, height - h)(rng);
      left = std::uniform_int_distribution<int64_t>(0, width - w)(rng);
      crop_h = h, crop_w = w, found = true;
    }
  }
  if (!found) {  // the whole image, trimmed to the ratio range, centered
    crop_w = std::min(width, static_cast<int64_t>(std::lround(height * 4.0 / 3.0)));
    crop_h = std::min(height, static_cast<int64_t>(std::lround(width * 4.0 / 3.0)));
    top = (height - crop_h) / 2, left = (width - crop_w) / 2;
  }
  x = resize(x.narrow(1, top, crop_h).narrow(2, left, crop_w), size, size);
  return std::bernoulli_distribution(0.5)(rng) ? x.flip({2}) : x;
}

}  // namespace mpt::data
