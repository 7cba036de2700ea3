// JPEG/PNG decoding.
#include "core/data/image_decode.h"

#include <png.h>
#include <turbojpeg.h>

#include <cstring>
#include <memory>

#include "core/common/error.h"
#include "core/io/files.h"

namespace mpt::data {
namespace {

torch::Tensor decode_jpeg(const std::string& bytes, const std::string& path) {
  std::unique_ptr<void, int (*)(tjhandle)> handle(tjInitDecompress(), tjDestroy);
  if (!handle) throw Error("TurboJPEG: cannot create a decompressor");
  const auto* data = reinterpret_cast<const unsigned char*>(bytes.data());
  const auto size = static_cast<unsigned long>(bytes.size());
  int width = 0, height = 0, subsampling = 0, colorspace = 0;
  if (tjDecompressHeader3(handle.get(), data, size, &width, &height, &subsampling, &colorspace) != 0)
    throw Error(path + ": corrupt JPEG header (" + tjGetErrorStr2(handle.get()) + ")");
  torch::Tensor pixels = torch::empty({height, width, 3}, torch::kUInt8);
  if (tjDecompress2(handle.get(), data, size, pixels.data_ptr<uint8_t>(), width, 0, height, TJPF_RGB, 0) != 0 &&
      tjGetErrorCode(handle.get()) == TJERR_FATAL)
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
  torch::Tensor pixels = torch::empty({static_cast<int64_t>(image.height), static_cast<int64_t>(image.width), 3}, torch::kUInt8);
  if (!png_image_finish_read(&image, nullptr, pixels.data_ptr<uint8_t>(), 0, nullptr)) {
    const std::string why = image.message;
    png_image_free(&image);
    throw Error(path + ": corrupt PNG (" + why + ")");
  }
  return pixels.permute({2, 0, 1}).contiguous();
}

}  // namespace

torch::Tensor decode_image(const std::string& path) {
  const std::string bytes = io::read_file(path);
  if (bytes.size() >= 3 && static_cast<uint8_t>(bytes[0]) == 0xFF && static_cast<uint8_t>(bytes[1]) == 0xD8)
    return decode_jpeg(bytes, path);
  if (bytes.size() >= 8 && bytes.compare(0, 8, "\x89PNG\r\n\x1a\n") == 0) return decode_png(bytes, path);
  throw Error(path + ": byte 0: not a JPEG (FF D8) or PNG (89 50 4E 47) file");
}

}  // namespace mpt::data
