// The two stages of an image batch (see image_batch.h).
#include "data/image_batch.h"

#include <ATen/Parallel.h>

#include <algorithm>
#include <cstring>

#include "common/error.h"

namespace mpt::data {
namespace {

void check_gather(const torch::Tensor& images, const torch::Tensor& indices) {
  MPT_CHECK(images.scalar_type() == torch::kUInt8 && images.dim() == 4 && images.is_contiguous(),
            "in-memory images must be contiguous uint8 (N, C, H, W)");
  MPT_CHECK(indices.scalar_type() == torch::kLong && indices.dim() == 1 && indices.is_contiguous(),
            "sample indices must be a contiguous int64 vector");
  const int64_t samples = images.size(0);
  const int64_t* index = indices.data_ptr<int64_t>();
  for (int64_t i = 0; i < indices.size(0); ++i)
    MPT_CHECK(index[i] >= 0 && index[i] < samples, "sample index out of range");
}

void check_statistics(const std::vector<float>& mean, const std::vector<float>& std, int64_t channels) {
  const auto fits = [&](const std::vector<float>& values) {
    return values.size() == 1 || static_cast<int64_t>(values.size()) == channels;
  };
  MPT_CHECK(fits(mean) && fits(std), "normalisation needs one mean and std, or one per image channel");
}

}  // namespace

CropFlips draw_crop_flips(int64_t count, int64_t height, uint64_t seed) {
  torch::Generator generator = at::detail::createCPUGenerator(seed);
  CropFlips draws;
  draws.pad = std::max<int64_t>(1, height / 8);
  draws.offsets = torch::randint(0, 2 * draws.pad + 1, {count, 2}, generator, torch::kLong);
  draws.flips = torch::rand({count}, generator).lt(0.5);
  return draws;
}

torch::Tensor gather_normalised(const torch::Tensor& images, const torch::Tensor& indices,
                                const std::vector<float>& mean, const std::vector<float>& std) {
  check_gather(images, indices);
  const int64_t count = indices.size(0), channels = images.size(1);
  check_statistics(mean, std, channels);
  const int64_t plane = images.size(2) * images.size(3), sample = channels * plane;
  torch::Tensor out = torch::empty({count, channels, images.size(2), images.size(3)}, torch::kFloat);
  const uint8_t* source = images.data_ptr<uint8_t>();
  const int64_t* index = indices.data_ptr<int64_t>();
  float* target = out.data_ptr<float>();
  at::parallel_for(0, count * channels, std::max<int64_t>(1, (1 << 14) / plane), [&](int64_t begin, int64_t end) {
    for (int64_t row = begin; row < end; ++row) {  // one channel plane of one sample
      const int64_t i = row / channels, c = row % channels;
      const float m = mean.size() == 1 ? mean[0] : mean[static_cast<size_t>(c)];
      const float s = std.size() == 1 ? std[0] : std[static_cast<size_t>(c)];
      const uint8_t* in = source + index[i] * sample + c * plane;
      float* o = target + row * plane;
      for (int64_t j = 0; j < plane; ++j) o[j] = (static_cast<float>(in[j]) / 255.0f - m) / s;
    }
  });
  return out;
}

torch::Tensor gather_pixels(const torch::Tensor& images, const torch::Tensor& indices, bool pinned) {
  check_gather(images, indices);
  const int64_t count = indices.size(0), sample = images.size(1) * images.size(2) * images.size(3);
  torch::Tensor out = torch::empty({count, images.size(1), images.size(2), images.size(3)},
                                   torch::TensorOptions().dtype(torch::kUInt8).pinned_memory(pinned));
  const uint8_t* source = images.data_ptr<uint8_t>();
  const int64_t* index = indices.data_ptr<int64_t>();
  uint8_t* target = out.data_ptr<uint8_t>();
  for (int64_t i = 0; i < count; ++i) std::memcpy(target + i * sample, source + index[i] * sample, sample);
  return out;
}

torch::Tensor& normalise_(torch::Tensor& images, const std::vector<float>& mean, const std::vector<float>& std) {
  const int64_t channels = images.size(1);
  check_statistics(mean, std, channels);
  if (mean.size() == 1 && std.size() == 1) return images.sub_(mean[0]).div_(std[0]);
  // Scalars per channel rather than a broadcast statistics tensor: that would be a blocking host-to-device copy.
  for (int64_t c = 0; c < channels; ++c) {
    const auto at = [&](const std::vector<float>& values) { return values[values.size() == 1 ? 0 : c]; };
    images.select(1, c).sub_(at(mean)).div_(at(std));
  }
  return images;
}

torch::Tensor normalise_pixels(const torch::Tensor& pixels, const std::vector<float>& mean,
                               const std::vector<float>& std) {
  MPT_CHECK(pixels.scalar_type() == torch::kUInt8 && pixels.dim() == 4, "pixels must be uint8 (N, C, H, W)");
  torch::Tensor images = pixels.to(torch::kFloat).div_(255.0f);
  return normalise_(images, mean, std);
}

torch::Tensor shape_images(torch::Tensor normalised, const Dataset& dataset, const CropFlips* crop_flips) {
  torch::Tensor x = std::move(normalised);
  if (dataset.out_size > 0 && dataset.out_size != x.size(2)) {
    namespace F = torch::nn::functional;
    x = F::interpolate(x, F::InterpolateFuncOptions()
                              .size(std::vector<int64_t>{dataset.out_size, dataset.out_size})
                              .mode(torch::kBilinear)
                              .align_corners(false));
  }
  if (crop_flips) {
    // Each crop as two gathers from the zero-padded batch, rows then (maybe mirrored) columns: exact copies, in
    // a handful of kernels for the whole batch rather than one copy per image.
    const int64_t count = x.size(0), channels = x.size(1), height = x.size(2), width = x.size(3);
    const int64_t pad = crop_flips->pad;
    const auto on_device = torch::TensorOptions().dtype(torch::kLong).device(x.device());
    const torch::Tensor padded = torch::constant_pad_nd(x, {pad, pad, pad, pad}, 0.0);
    const torch::Tensor rows = crop_flips->offsets.select(1, 0).view({count, 1, 1, 1}) +
                               torch::arange(height, on_device).view({1, 1, height, 1});
    const torch::Tensor forward = torch::arange(width, on_device);
    const torch::Tensor columns =
        crop_flips->offsets.select(1, 1).view({count, 1, 1, 1}) +
        torch::where(crop_flips->flips.view({count, 1, 1, 1}), width - 1 - forward, forward).view({count, 1, 1, width});
    x = padded.gather(2, rows.expand({count, channels, height, width + 2 * pad}))
            .gather(3, columns.expand({count, channels, height, width}));
  }
  if (dataset.out_channels > x.size(1))  // grayscale -> RGB for ImageNet-style stems
    x = x.expand({-1, dataset.out_channels, -1, -1}).contiguous();
  return x;
}

}  // namespace mpt::data
