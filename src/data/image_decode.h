// Image files to pixels: JPEG through libjpeg-turbo's TurboJPEG API, PNG through libpng's simplified API.
#pragma once

#include <torch/torch.h>

#include <string>

namespace mpt::data {

// uint8 RGB (3, H, W) of the JPEG or PNG at `path` (told apart by content, not name); grayscale and palette
// images become RGB, alpha is dropped. A file that is neither, or is corrupt, is an error naming it and why.
torch::Tensor decode_image(const std::string& path);

}  // namespace mpt::data
