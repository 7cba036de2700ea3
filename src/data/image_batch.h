// An image batch from a dataset's uint8 (N, C, H, W) images, made in two stages so that the FP32 work runs where
// the model does. First the samples are gathered on the host: on the CPU normalised in the same pass, for a GPU
// as the uint8 pixels themselves, so that a quarter of the FP32 bytes cross to the device (a 48th for
// Fashion-MNIST made 112 px RGB). Then tensor ops on whichever device holds the batch normalise it (GPU), resize
// it, crop and flip it, and widen grayscale to RGB. On the host that work was a sizeable part of a ResNet-50 step
// on a GPU (docs/findings.md).
#pragma once

#include <torch/torch.h>

#include <cstdint>
#include <vector>

#include "data/dataset.h"

namespace mpt::data {

// An augmented batch's random crops and flips, drawn on the host from the batch's seed so that the batch does
// not depend on where it is finished.
struct CropFlips {
  int64_t pad = 0;        // zero (= the mean after normalisation) border added on every side before cropping
  torch::Tensor offsets;  // int64 (B, 2): each crop's top row and left column in the padded image
  torch::Tensor flips;    // bool (B): mirror the crop left to right
};

// The crops and flips of `count` images `height` rows high (after resizing).
CropFlips draw_crop_flips(int64_t count, int64_t height, uint64_t seed);

// (images[indices] / 255 - mean) / std as FP32, in one pass on LibTorch's threads: the same float operations, in
// the same order, as normalise_pixels' tensor ops on the CPU, which took five passes and a noticeable part of the
// FP32 MLP's step (docs/findings.md). One mean and std apply to every channel, or one per channel.
torch::Tensor gather_normalised(const torch::Tensor& images, const torch::Tensor& indices,
                                const std::vector<float>& mean, const std::vector<float>& std);

// images[indices] as they are (uint8), in pinned host memory when `pinned`, ready for a non-blocking copy to a GPU.
torch::Tensor gather_pixels(const torch::Tensor& images, const torch::Tensor& indices, bool pinned);

// FP32 images in [0, 1], (N, C, H, W), on any device: (x - mean) / std in place.
torch::Tensor& normalise_(torch::Tensor& images, const std::vector<float>& mean, const std::vector<float>& std);

// uint8 pixels on any device as (x / 255 - mean) / std in FP32, with tensor ops on that device.
torch::Tensor normalise_pixels(const torch::Tensor& pixels, const std::vector<float>& mean,
                               const std::vector<float>& std);

// A normalised batch in the dataset's output shape: resized to out_size (bilinear), cropped and flipped per
// `crop_flips` when given (its tensors on the batch's device), and grayscale replicated to out_channels.
torch::Tensor shape_images(torch::Tensor normalised, const Dataset& dataset, const CropFlips* crop_flips);

}  // namespace mpt::data
