// JPEG/PNG decoding.
#include "data/image_decode.h"

#include <png.h>
#include <turbojpeg.h>

#include <cstring>
#include <memory>

#include "common/error.h"
#include "common/files.h"

namespace mpt::data {
namespace {

// Training images are at most a few thousand pixels a side; a header declaring more is refused before its pixels
// are allocated (a few hundred bytes can declare gigabytes).
constexpr int64_t kMaxPixels = int64_t{8192} * 8192;

void check_declared_size(int64_t width, int64_t height, const std::string& path, const char* format) {
  if (width <= 0 || height <= 0)
    throw Error(path + ": corrupt " + format + " header (" + std::to_string(width) + " x " + std::to_string(height) +
                " pixels)");
  if (width * height > kMaxPixels)
    throw Error(path + ": declares " + std::to_string(width) + " x " + std::to_string(height) +
                " pixels; mpt decodes images of at most 8192 x 8192");
}

torch::Tensor decode_jpeg(const std::string& bytes, const std::string& path) {
  std::unique_ptr<void, int (*)(tjhandle)> handle(tjInitDecompress(), tjDestroy);
  if (!handle) throw Error("TurboJPEG: cannot create a decompressor");
  const auto* data = reinterpret_cast<const unsigned char*>(bytes.data());
  const auto size = static_cast<unsigned long>(bytes.size());
  int width = 0, height = 0, subsampling = 0, colorspace = 0;
  if (tjDecompressHeader3(handle.get(), data, size, &width, &height, &subsampling, &colorspace) != 0)
    throw Error(path + ": corrupt JPEG header (" + tjGetErrorStr2(handle.get()) + ")");
  check_declared_size(width, height, path, "JPEG");
  torch::Tensor pixels = torch::empty({height, width, 3}, torch::kUInt8);
  // Warnings count too: a truncated file decodes "successfully" with its missing rows grey.
  if (tjDecompress2(handle.get(), data, size, pixels.data_ptr<uint8_t>(), width, 0, height, TJPF_RGB, 0) != 0)
    throw Error(path + ": corrupt JPEG data (" + tjGetErrorStr2(handle.get()) + ")");
  return pixels.permute({2, 0, 1}).contiguous();
}

torch::Tensor decode_png(const std::string& bytes, const std::string& path) {
  png_image image;
  std::memset(&image, 0, sizeof(image));
  image.version = PNG_IMAGE_VERSION;
  if (!png_image_begin_read_from_memory(&image, bytes.data(), bytes.size()))
    throw Error(path + ": corrupt PNG (" + image.message + ")");
  image.format = PNG_FORMAT_RGB;
  try {
    check_declared_size(image.width, image.height, path, "PNG");
  } catch (const Error&) {
    png_image_free(&image);
    throw;
  }
  torch::Tensor pixels =
      torch::empty({static_cast<int64_t>(image.height), static_cast<int64_t>(image.width), 3}, torch::kUInt8);
  if (!png_image_finish_read(&image, nullptr, pixels.data_ptr<uint8_t>(), 0, nullptr)) {
    const std::string why = image.message;
    png_image_free(&image);
    throw Error(path + ": corrupt PNG (" + why + ")");
  }
  return pixels.permute({2, 0, 1}).contiguous();
}

}  // namespace

torch::Tensor decode_image(const std::string& path) {
  const std::string bytes = read_file(path);
  if (bytes.size() >= 3 && static_cast<uint8_t>(bytes[0]) == 0xFF && static_cast<uint8_t>(bytes[1]) == 0xD8)
    return decode_jpeg(bytes, path);
  if (bytes.size() >= 8 && bytes.compare(0, 8, "\x89PNG\r\n\x1a\n") == 0) return decode_png(bytes, path);
  throw Error(path + ": byte 0: not a JPEG (FF D8) or PNG (89 50 4E 47) file");
}

}  // namespace mpt::data
