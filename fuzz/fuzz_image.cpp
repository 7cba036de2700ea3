// JPEG and PNG decoding for image folders.
#include "data/image_decode.h"
#include "fuzz/harness.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string path = mpt::fuzz::scratch_file(data, size, "image");
  mpt::fuzz::refusals_only([&] { mpt::data::decode_image(path); });
  return 0;
}
