// An in-memory labelled dataset and the Fashion-MNIST loader that fills one from the real IDX files.
#pragma once

#include <torch/torch.h>

#include <string>

namespace mpt::data {

struct DataConfig {
  std::string name = "fashion_mnist";
  std::string root = "/usr/share/datasets/fashion-mnist";
  int64_t batch_size = 128;
  bool shuffle = true;
  int64_t train_limit = 0;  // 0 = all
  int64_t test_limit = 0;
  int64_t image_size = 0;   // resize batches to image_size x image_size (0 = native)
  int64_t channels = 0;     // 3 replicates grayscale to RGB (0 = native)
};

struct Dataset {
  torch::Tensor images;  // uint8 (N, 1, H, W): stays compact on the host; batches become FP32
  torch::Tensor labels;  // int64 (N)
  int64_t num_classes = 0;
  float mean = 0.0f;  // per-pixel normalisation, from the training split
  float std = 1.0f;
  int64_t out_channels = 0;  // batch shape adjustments (DataConfig::channels, image_size); 0 = native
  int64_t out_size = 0;
  int64_t size() const { return labels.size(0); }
};

// split is "train" or "t10k"; limit > 0 keeps only the first `limit` samples; batches take the config's
// channels and image_size.
Dataset load_fashion_mnist(const DataConfig& config, const std::string& split, int64_t limit);

// The path of ROOT/STEM.gz or ROOT/STEM, whichever exists; "" when neither does.
std::string find_idx_file(const std::string& root, const std::string& stem);

// A dataset's sample shape and classes without reading it: (channels, height, width, classes).
struct SampleShape {
  int64_t channels, height, width, num_classes;
};
SampleShape sample_shape(const DataConfig& config);

// Random images and labels already in the spec's batch shape, for benchmarks that keep disk and decoding
// out of the measurement (`mpt bench` without --real-data).
Dataset synthetic_dataset(const DataConfig& config, int64_t samples);

// The four files a Fashion-MNIST root must hold, for validation before any work.
std::vector<std::string> fashion_mnist_stems();

}  // namespace mpt::data
