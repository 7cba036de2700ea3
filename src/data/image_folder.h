// Image-folder helpers shared by the dataset registry and the loader's decoding workers.
#pragma once

#include <torch/torch.h>

#include <string>
#include <vector>

namespace mpt::data {

// The class names of ROOT/train/<class>/, sorted: label i is classes[i].
std::vector<std::string> image_folder_classes(const std::string& root);

// uint8 (3, H, W) -> FP32 (3, size, size) in 0..1: a random-resized crop and flip drawn from `seed` when
// `augment`, else resize-shorter-side-to-8/7 and center crop.
torch::Tensor transform_image(const torch::Tensor& image, int64_t size, bool augment, uint64_t seed);

}  // namespace mpt::data
